"""AcuRank aimed at a cut (``--cut-target cut``): its uncertain set lies around the boundary at the cut's size K
instead of the top k's, so the threshold's s_i sum to K at each adaptive step; :class:`CutTarget` reads K from the
ratings through the map and the cut rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acurank_cli.method.registry import build_strategy
from acurank_cli.records import Phase
from acurank_cli.relevance import CalibrationMap, Cut, CutTarget
from scripted import drive, reverse, task


class Fixed:
    """A target whose cut keeps ``k`` documents whatever the ratings."""

    def __init__(self, k: int):
        self.k = k

    def size(self, mu, prob, sigma=None, pivot=None) -> int:
        return self.k


@pytest.mark.parametrize("size, boundary", [(3, 3), (0, 1), (500, 59)])
def test_the_uncertain_set_is_around_the_cuts_boundary(size, boundary):
    plain = build_strategy("acurank")
    aimed = plain.aimed_at(Fixed(size))
    steps, _ = drive(aimed, task(60), reverse)
    adaptive = [(s, snap) for s, snap in steps if s.phase in (Phase.adaptive, Phase.final)]
    assert adaptive
    for step, snap in adaptive:
        # the threshold t solves sum_i P(x_i > t) = K (K kept within 1..n-1): the snapshot's s_i sum to it
        assert sum(d.s for d in snap.docs) == pytest.approx(boundary, abs=1e-6)
        if step.phase is Phase.adaptive:  # C = {eps < s_i < 1 - eps}, in groups of m by s_i, descending
            chosen = sorted((d for d in snap.docs if 0.01 < d.s < 0.99), key=lambda d: -d.s)
            assert [d for w in step.windows for d in w] == [d.docid for d in chosen]
    for step, snap in drive(plain, task(60), reverse)[0]:
        if step.phase is Phase.adaptive:
            assert sum(d.s for d in snap.docs) == pytest.approx(10, abs=1e-6)


class Recording(Fixed):
    """A fixed target that keeps what each call was given."""

    def __init__(self, k: int):
        super().__init__(k)
        self.given: list[tuple] = []

    def size(self, mu, prob, sigma=None, pivot=None) -> int:
        self.given.append((np.array(mu), np.array(prob), np.array(sigma)))
        return self.k


@pytest.mark.parametrize("rule", ["threshold", "exact"])
def test_the_target_reads_the_exact_p_topk_the_map_was_fit_on(rule):
    """A map is fit on the final ratings' exact p_topk = P(rank <= k); aimed at a cut, AcuRank hands the target that
    same quantity under the ratings of each step (not the threshold rule's s_i, which differ from it)."""
    from acurank_cli.method.uncertainty import top_k_probabilities

    target = Recording(4)
    steps, _ = drive(build_strategy("acurank", uncertainty=rule).aimed_at(target), task(60), reverse)
    assert target.given
    for mu, prob, sigma in target.given:
        assert prob == pytest.approx(top_k_probabilities(mu, sigma, 10), abs=1e-9)
    s_i = [np.array(sorted(d.s for d in snap.docs)) for step, snap in steps if snap is not None]
    assert rule == "exact" or not any(np.allclose(np.sort(p), s, atol=1e-3) for _, p, _ in target.given for s in s_i)


def test_cut_target_size_by_hand():
    # P(relevant) = sigmoid(1 - log(rank)): >= 0.5 exactly for rank <= e, so ranks 1 and 2
    m = CalibrationMap(2, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.0, 0.0, -1.0), 1.0)
    mu = np.array([1.0, 5.0, 3.0, 2.0])
    assert CutTarget(m, Cut("p", 0.5)).size(mu, np.full(4, 0.5)) == 2
    # expected F1 over P = sigmoid(1 - log r) for r = 1..4: 0.731, 0.576, 0.475, 0.405 (sum 2.187):
    # K=1 1.462/3.187 = 0.459, K=2 2.614/4.187 = 0.624, K=3 3.564/5.187 = 0.687, K=4 4.374/6.187 = 0.707
    ps = [1 / (1 + math.exp(-(1 - math.log(r)))) for r in range(1, 5)]
    assert ps == pytest.approx([0.731, 0.576, 0.475, 0.405], abs=1e-3)
    assert CutTarget(m, Cut("f1")).size(mu, np.full(4, 0.5)) == 4
