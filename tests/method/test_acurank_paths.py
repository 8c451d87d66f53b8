"""AcuRank's less travelled paths, with a scripted reranker: step numbering, every stop reason, the final
ranking's scores, the random partition's seeded order, and errors raised inside the plan."""

from __future__ import annotations

import random

import pytest

from acurank_cli.errors import InputError
from acurank_cli.records import Candidate, Phase, RankingTask
from acurank_cli.method.registry import build_strategy
from scripted import by_index, drive, task


def phases(steps):
    return [s.phase for s, _ in steps]


def test_strategy_keeps_its_method_name():
    assert build_strategy("acurank-H").name == "acurank-H" and build_strategy("acurank-9").name == "acurank-9"


def test_iteration_counts_groups_consumed_and_done_closes():
    """Initial pass: iteration 0; each adaptive step: the groups consumed before it; done: all consumed."""
    steps, ranking = drive(build_strategy("acurank"), task(45))
    assert phases(steps)[0] is Phase.initial and steps[0][0].iteration == 0 and len(steps[0][0].windows) == 3
    consumed = 0
    for step, _ in steps[1:-1]:
        assert step.phase in (Phase.adaptive, Phase.final) and step.iteration == consumed
        consumed += len(step.windows)
    done, snap = steps[-1]
    assert done.phase is Phase.done and done.iteration == consumed and done.windows == ()
    # the plan's ranking is the final snapshot's: by mu, with mu as the score
    assert [(r.docid, r.score) for r in ranking] == [(d.docid, d.mu) for d in snap.docs]
    assert all(isinstance(r.score, float) for r in ranking) and all(d.sigma > 0 for d in snap.docs)


def test_converged_when_nothing_is_uncertain_and_tau_is_zero():
    """n = 5 <= k: every s_i >= 0.999, so C is empty; with tau = 0 there is no final pass: stop converged."""
    steps, ranking = drive(build_strategy("acurank", tau=0), task(5))
    assert phases(steps) == [Phase.initial, Phase.done] and steps[-1][0].stop == "converged"
    assert len(ranking) == 5


def test_final_pass_cut_by_the_budget_stops_by_budget():
    """tau = 100: the first adaptive iteration is the final pass over {s > eps}; B = 1 leaves one group."""
    steps, _ = drive(build_strategy("acurank", tau=100, budget=1), task(100))
    final = [s for s, _ in steps if s.phase is Phase.final]
    assert len(final) == 1 and len(final[0].windows) == 1 and steps[-1][0].stop == "budget"
    steps, _ = drive(build_strategy("acurank", tau=100), task(100))
    assert steps[-1][0].stop == "tau"


def test_round_cap_final_pass_stops_by_round_cap():
    steps, _ = drive(build_strategy("acurank", max_rounds=2), task(100))
    assert phases(steps) == [Phase.initial, Phase.final, Phase.done] and steps[-1][0].stop == "round-cap"


def test_topk_stable_stops_after_the_first_unchanged_iteration():
    """With a reranker that knows the true order d0 > d1 > ..., the top 10 (by mu, in order) moves until it
    is d0..d9; the first adaptive iteration after which it did not change is the last."""
    steps, _ = drive(build_strategy("acurank", stop="topk-stable"), task(100), answer=by_index)
    tops = [tuple(d.docid for d in snap.docs[:10]) for _, snap in steps[1:]]  # before each iteration, and at the end
    assert steps[-1][0].stop == "topk-stable" and all(s.phase is Phase.adaptive for s, _ in steps[1:-1])
    assert tops[-1] == tops[-2] == tuple(f"d{i}" for i in range(10))
    assert all(a != b for a, b in zip(tops[:-2], tops[1:-1]))  # it stopped at the first unchanged one
    assert len(tops) > 3


def test_random_partition_is_the_documented_seeded_shuffle():
    """partition=random shuffles C with random.Random("acurank|<seed>|<qid>|partition") once per iteration,
    in s_i order first; sequential sends C in s_i order."""
    seq, _ = drive(build_strategy("acurank", tau=1), task(60, qid="q7"))
    rnd, _ = drive(build_strategy("acurank", tau=1, partition="random", seed=3), task(60, qid="q7"))
    first_seq, first_rnd = seq[1][0], rnd[1][0]
    assert first_seq.phase is Phase.adaptive and first_rnd.phase is Phase.adaptive
    chosen = [d for w in first_seq.windows for d in w]
    random.Random("acurank|3|q7|partition").shuffle(chosen)
    assert [d for w in first_rnd.windows for d in w] == chosen


def test_zscore_init_errors_name_the_query():
    t = RankingTask("q9", "x", (Candidate("a", 1.0), Candidate("b", float("nan"))))
    with pytest.raises(InputError) as exc:
        drive(build_strategy("acurank", init="zscore"), t)
    assert str(exc.value) == "query q9: first-stage scores contain NaN or infinity"
    with pytest.raises(InputError) as exc:
        drive(build_strategy("acurank"), RankingTask("q8", "x", (Candidate("a", 1.0), Candidate("b", -1.0))))
    assert str(exc.value).startswith("query q8: first-stage score -1.0 is not positive")


def test_topk_stable_can_stop_after_one_iteration():
    """n = 11: the one initial window puts d0..d9 on top; the adaptive group (the documents around the
    cutoff) reranked in the true order leaves them in place, so the first iteration is the last (the top
    k before it counts). Found by search: with n = 12..100 the first group reorders the top 10 by mu."""
    steps, _ = drive(build_strategy("acurank", stop="topk-stable"), task(11), answer=by_index)
    assert phases(steps) == [Phase.initial, Phase.adaptive, Phase.done] and steps[-1][0].stop == "topk-stable"


def test_trueskill_static_errors_name_the_query():
    t = RankingTask("q5", "x", (Candidate("a", 1.0), Candidate("b", float("inf"))))
    with pytest.raises(InputError) as exc:
        drive(build_strategy("ts-1", init="zscore"), t)
    assert str(exc.value) == "query q5: first-stage scores contain NaN or infinity"
