"""A pivot in every window (``--pivot``): a reference player rated in the same TrueSkill game. It rides along in
every window of two or more candidates, starts at the candidates' mean mu and widest sigma, is never ranked,
assessed or counted, and its final rating is in the snapshot; the simulated reranker grades it --sim-pivot-grade."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acurank_cli.method.registry import build_strategy
from acurank_cli.method.trueskill import get_updater, initial_ratings, update_groups
from acurank_cli.records import Phase, RerankRequest, pivot_id
from acurank_cli.relevance import PIVOT_FEATURES, features
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from scripted import drive, reverse, task


def test_the_pivot_rides_in_every_window_and_is_never_ranked():
    steps, ranking = drive(build_strategy("acurank").with_pivot(), task(45, qid="q7"), reverse)
    pivot = pivot_id("q7")
    initial = steps[0][0]
    assert [list(w) for w in initial.windows] == [[f"d{i}" for i in range(0, 20)] + [pivot],
                                                  [f"d{i}" for i in range(20, 40)] + [pivot],
                                                  [f"d{i}" for i in range(40, 45)] + [pivot]]
    for step, snap in steps[1:]:
        # a group of one candidate is never sent, so no pivot joins it
        assert all((w[-1] == pivot and len(w) >= 3) or (len(w) == 1 and w[0] != pivot) for w in step.windows)
        if snap is not None:
            assert pivot not in {d.docid for d in snap.docs} and len(snap.docs) == 45
            # the assessment is over the candidates alone: the threshold's s_i sum to k
            if step.phase is not Phase.done:
                assert sum(d.s for d in snap.docs) == pytest.approx(10, abs=1e-6)
    assert len(ranking) == 45 and pivot not in {r.docid for r in ranking}
    assert steps[-1][1].pivot is not None
    # without a pivot: the same candidate windows in the initial pass, and no pivot rating
    plain = drive(build_strategy("acurank"), task(45, qid="q7"), reverse)[0]
    assert [list(w) for w in plain[0][0].windows] == [list(w[:-1]) for w in initial.windows]
    assert plain[-1][1].pivot is None


def test_the_pivot_starts_at_the_mean_mu_and_widest_sigma():
    """budget 0: the initial pass only; its update, done here by hand from that prior, is the final rating. The scores
    are skewed (mean 45.7, median 49.5, max 60), so another prior (the median, the mean sigma) rates otherwise."""
    from acurank_cli.records import Candidate, RankingTask

    t = RankingTask("q", "query", tuple(Candidate(f"d{i}", 60.0 - 0.05 * i ** 2) for i in range(30)))
    steps, _ = drive(build_strategy("acurank", budget=0).with_pivot(), t, reverse)
    mu, sigma = initial_ratings([c.score for c in t.candidates], "score", "q")
    mu, sigma = np.append(mu, mu.mean()), np.append(sigma, sigma.max())
    groups = [list(range(20)) + [30], list(range(20, 30)) + [30]]
    update_groups(get_updater("fast"), mu, sigma, groups, [tuple(reversed(range(len(g)))) for g in groups])
    final = steps[-1][1]
    assert final.pivot == pytest.approx((mu[30], sigma[30]), rel=1e-12)
    assert {d.docid: d.mu for d in final.docs}["d0"] == pytest.approx(mu[0], rel=1e-12)


def test_the_simulated_reranker_grades_the_pivot():
    grades = {"q": {"a": 3, "b": 1}}
    for pivot_grade, first in ((1.5, ["a", pivot_id("q")]), (0.5, ["a", "b"])):
        sim = SimulatedReranker(grades, noise=0.0, pivot_grade=pivot_grade)
        [ab] = sim.rerank_batch([RerankRequest("q", "query", ("b", "a", pivot_id("q")), ())])
        order = [("b", "a", pivot_id("q"))[i] for i in ab.order]
        assert order[:2] == first
    assert "pivot_grade" not in SimulatedReranker(grades).fingerprint()
    assert SimulatedReranker(grades, pivot_grade=2.5).fingerprint()["pivot_grade"] == 2.5


def test_pivot_features_by_hand():
    from acurank_cli.records import DocRating

    docs = [DocRating(docid="x", mu=3.0, sigma=1.0, s=0.0, rank=1, p_topk=0.5),
            DocRating(docid="y", mu=1.0, sigma=2.0, s=0.0, rank=2, p_topk=0.5)]
    x = features(docs, pivot=(2.0, 1.0))
    assert len(x[0]) == len(PIVOT_FEATURES) == 5
    assert x[0][3:] == pytest.approx((1 / math.sqrt(2), 0.5)) and x[1][3:] == pytest.approx((-1 / math.sqrt(5), 0.5))
    assert len(features(docs)[0]) == 3
