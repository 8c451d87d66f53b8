"""The membership of every set AcuRank builds, at its boundaries, with values chosen by hand.

Algorithm 1 (../shared/spec/acurank-semantics.md): C = {i : eps < s_i < 1 - eps} (strict on both sides);
the pass is final when |C| < tau (strict: |C| = tau is not final) or when the next round is the last the
round cap R allows; a final pass covers {i : s_i > eps} (strict), in s_i order, cut into groups of m, at
most as many groups as the budget has left. The probabilities below are set by hand (an Assessment is
what the uncertainty rule returns), so each expected set is read off the numbers, not computed by the code
under test.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from acurank_cli.method.acurank import AcuRank, Choice
from acurank_cli.method.acurank_params import AcuRankParams
from acurank_cli.method.uncertainty import Assessment, _undecided
from acurank_cli.records import StopReason

EPS = 0.01


def assessment(probs: list[float], eps: float = EPS) -> Assessment:
    p = np.array(probs)
    return Assessment(p, _undecided(p, eps))


def choose(probs, *, tau=3, m=2, left=100, rounds=1, max_rounds=None, eps=EPS) -> Choice:
    strategy = AcuRank("acurank", AcuRankParams(eps=eps, tau=tau, m=m, max_rounds=max_rounds))
    a = assessment(probs, eps)
    order = sorted(range(len(probs)), key=lambda i: -probs[i])  # as plan() orders them: by s_i, descending
    return strategy.choose(order, a, rounds, left, random.Random(0))


def members(choice: Choice) -> list[int]:
    return [i for g in choice.groups for i in g]


def test_uncertain_set_is_strict_at_eps_and_one_minus_eps():
    # s:      1.0  0.99 (=1-eps)  0.9901  0.98  0.5  0.0101  0.01 (=eps)  0.0099  0.0
    probs = [1.0, 1 - EPS, 0.9901, 0.98, 0.5, 0.0101, EPS, 0.0099, 0.0]
    assert list(_undecided(np.array(probs), EPS)) == [False, False, False, True, True, True, False, False, False]


def test_adaptive_pass_sends_exactly_c_in_s_order():
    probs = [1.0, 1 - EPS, 0.98, 0.5, 0.0101, EPS, 0.0]
    c = choose(probs, tau=3)  # C = {2, 3, 4}: |C| = 3 = tau, so not final
    assert (c.final, c.uncertain, members(c)) == (False, 3, [2, 3, 4])
    assert c.groups == ((2, 3), (4,))  # groups of m = 2 in s_i order


def test_final_pass_covers_s_above_eps_strictly():
    # doc 0: s = 1 (sure), doc 1: s = 0.5 (C), doc 2: 1.5 eps (above eps: in the final pass, though not
    # above 2 eps), doc 3: s = eps exactly (not above eps: out), doc 4: 0.5 eps (out)
    probs = [1.0, 0.5, 1.5 * EPS, EPS, 0.5 * EPS]
    c = choose(probs, tau=3)  # C = {1, 2}: |C| = 2 < tau = 3, so this is the final pass
    assert (c.final, c.uncertain) == (True, 2)
    assert members(c) == [0, 1, 2]


def test_final_pass_keeps_the_sure_documents_and_drops_only_the_hopeless():
    probs = [1.0, 1 - EPS, 0.999, 0.011, 0.009]
    # by hand: 1.0 no, 0.99 no (= 1 - eps), 0.999 no, 0.011 yes (eps < 0.011 < 0.99), 0.009 no: |C| = 1
    c = choose(probs, tau=1)  # |C| = 1 = tau: not final
    assert (c.final, c.uncertain, members(c)) == (False, 1, [3])
    c = choose(probs, tau=2)  # |C| = 1 < 2: final over {s > eps}, in s order: 1.0, 0.999, 0.99, 0.011
    assert (c.final, members(c)) == (True, [0, 2, 1, 3])


def test_budget_cuts_the_groups_and_names_the_cap():
    probs = [0.9, 0.8, 0.7, 0.6, 0.5]
    c = choose(probs, tau=3, m=2, left=2)  # C = all 5 -> 3 groups wanted, 2 allowed
    assert (c.wanted, c.groups) == (3, ((0, 1), (2, 3)))
    final = choose([1.0, 0.5, 0.2, 0.0], tau=3, m=2, left=1)  # |C| = 2 < 3: final over {0, 1, 2}: 2 groups
    assert (final.final, final.wanted, final.groups) == (True, 2, ((0, 1),))
    strategy = AcuRank("acurank-12", AcuRankParams(cap=12))
    assert strategy._stop_after_final(final) is StopReason.call_cap  # the cut, not tau, ended it
    full = choose([1.0, 0.5, 0.2, 0.0], tau=3, m=2, left=2)
    assert strategy._stop_after_final(full) is StopReason.tau


@pytest.mark.parametrize("rounds, max_rounds, final", [(1, 3, False), (2, 3, True), (1, 2, True), (1, None, False)])
def test_round_cap_makes_the_last_allowed_round_final(rounds, max_rounds, final):
    probs = [1.0, 0.9, 0.5, 0.3, 1.5 * EPS, 0.0]  # |C| = 4 >= tau = 3: final only by the round cap
    c = choose(probs, tau=3, rounds=rounds, max_rounds=max_rounds)
    assert (c.final, c.round_cap) == (final, final)
    assert members(c) == ([0, 1, 2, 3, 4] if final else [1, 2, 3, 4])


def test_stop_reasons_without_groups():
    strategy = AcuRank("acurank", AcuRankParams())
    assert strategy._stop_without_groups(Choice((), 0, False, 0, False)) is StopReason.converged
    assert strategy._stop_without_groups(Choice((), 0, True, 0, False)) is StopReason.tau
    assert strategy._stop_without_groups(Choice((), 0, True, 0, True)) is StopReason.round_cap
