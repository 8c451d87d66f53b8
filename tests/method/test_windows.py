"""The exact windows each method sends, pinned against sequences worked out by hand from
shared/spec/acurank-semantics.md (not recorded from the code). A scripted reranker records every
window (docids in presented order) and answers with the presented order or its reverse.

Each named off-by-one mutant of the code fails here: ``ceil(n/m)`` -> ``n//m`` in the acurank-N cap,
dropping the sliding window at position 0, ``n <= k`` -> ``n < k`` in the threshold, and
``|C| < tau`` -> ``<= tau`` in the stop rule.
"""

from __future__ import annotations

import numpy as np
import pytest

from acurank_cli.errors import InputError

from acurank_cli.run.driver import Driver
from acurank_cli.method.uncertainty import Z_999, threshold
from acurank_cli.records import Candidate, RankingTask, RerankResult, Step
from acurank_cli.rerankers.backend import RerankerBase
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from acurank_cli.method.registry import build_strategy

SIZES = (1, 2, 7, 10, 19, 20, 21, 95, 100, 101)


class Scripted(RerankerBase):
    """Answers each window with its presented order (or reversed); records every window sent."""

    name = "scripted"
    needs_texts = False

    def __init__(self, reverse: bool = False):
        self.reverse = reverse
        self.windows: list[tuple[str, ...]] = []

    def rerank_batch(self, requests):
        self.windows += [r.docids for r in requests]
        return [RerankResult(order=tuple(reversed(range(len(r.docids)))) if self.reverse else tuple(range(len(r.docids))))
                for r in requests]


def task(n: int) -> RankingTask:
    return RankingTask("q", "", tuple(Candidate(f"d{i}", 50.0 - 0.3 * i) for i in range(n)))


def run(method: str, n: int, reverse: bool = False, **opts):
    rr, steps = Scripted(reverse), []
    (out,) = Driver(build_strategy(method, **opts), rr, {}, on_step=lambda t, s: steps.append(s)).run([task(n)])
    return out, rr.windows, steps


def d(*ranges) -> tuple[str, ...]:
    """Docids d{a}..d{b-1} for each (a, b), concatenated."""
    return tuple(f"d{i}" for a, b in ranges for i in range(a, b))


# --- sliding windows: starts n-m, n-m-10, ..., and 0 if missing (stride m/2) ---------------------

SW_STARTS_M20 = {  # by hand: range(max(0, n - 20), -1, -10) plus 0
    1: [0], 2: [0], 7: [0], 10: [0], 19: [0], 20: [0], 21: [1, 0], 29: [9, 0],
    95: [75, 65, 55, 45, 35, 25, 15, 5, 0], 99: [79, 69, 59, 49, 39, 29, 19, 9, 0],
    100: [80, 70, 60, 50, 40, 30, 20, 10, 0],
    101: [81, 71, 61, 51, 41, 31, 21, 11, 1, 0],
}
SW_STARTS_M10 = {  # m = 10, stride 5
    7: [0], 10: [0], 19: [9, 4, 0], 20: [10, 5, 0], 21: [11, 6, 1, 0],
    100: [90, 85, 80, 75, 70, 65, 60, 55, 50, 45, 40, 35, 30, 25, 20, 15, 10, 5, 0],
}


@pytest.mark.parametrize("n", sorted(SW_STARTS_M20))  # 29 and 99: the next start below 0 would be -1
def test_sliding_windows_m20(n):
    out, windows, _ = run("sw-1", n)
    expected = [d((s, min(s + 20, n))) for s in SW_STARTS_M20[n] if min(s + 20, n) - s >= 2]
    assert windows == expected
    assert out.tally.calls == len(expected) == (0 if n == 1 else len(SW_STARTS_M20[n]))


@pytest.mark.parametrize("n", sorted(SW_STARTS_M10))
def test_sliding_windows_m10_and_two_passes(n):
    _, windows, _ = run("sw-2", n, m=10)
    one = [d((s, min(s + 10, n))) for s in SW_STARTS_M10[n]]
    assert windows == one + one  # presented order kept: the second pass sees the same list


def test_sliding_window_writes_back_the_returned_order():
    # n = 21, reversed answers: start 1 reverses d1..d20 -> d0 d20 d19 ... d1; start 0 then gets
    # d0 d20 ... d2 and reverses it -> d2 d3 ... d20 d0, and d1 stays last.
    out, windows, _ = run("sw-1", 21, reverse=True)
    assert windows == [d((1, 21)), ("d0",) + tuple(f"d{i}" for i in range(20, 1, -1))]
    assert [r.docid for r in out.ranking] == list(d((2, 21))) + ["d0", "d1"]


# --- AcuRank: initial pass, caps, adaptive and final groups -----------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_acurank_initial_pass(n):
    _, windows, steps = run("acurank", n)
    first = steps[0]
    assert first.phase == "initial"
    assert first.windows == tuple(d((s, min(s + 20, n))) for s in range(0, n, 20))  # 101: ..., (d100,)
    sent = [w for w in first.windows if len(w) >= 2]
    assert windows[: len(sent)] == sent


@pytest.mark.parametrize("n, cap, calls", [
    (41, 3, 2),    # initial windows 20, 20, 1 (one not sent): B = 3 - ceil(41/20) = 0, so 2 calls
    (41, 4, 3),    # B = 1
    (100, 5, 5),   # B = 0
    (21, 2, 1),    # windows 20 and 1: B = 2 - 2 = 0, one call
])
def test_acurank_n_cap_counts_initial_windows_with_ceil(n, cap, calls):
    out, windows, steps = run(f"acurank-{cap}", n)
    adaptive_groups = sum(len(s.windows) for s in steps[1:] if s.windows)
    assert adaptive_groups == cap - -(-n // 20)
    assert out.tally.calls == calls and len(windows) == calls


def test_budget_truncates_groups():
    # --budget 1: after the initial pass the first adaptive step takes only the first group of C
    out, windows, steps = run("acurank", 100, budget=1)
    sent = [s for s in steps if s.windows]
    assert [s.phase for s in sent] == ["initial", "adaptive"] and sent[1].uncertain > 20
    assert len(sent[1].windows) == 1 and len(sent[1].windows[0]) == 20
    assert out.tally.calls == 6 and out.stop == "budget"


def _check_groups(step: Step, eps: float, tau: int, m: int = 20) -> None:
    """The step's windows are C (or, for the final pass, {s > eps}) in s order, cut into groups of m."""
    docs = step.snapshot().docs
    s = {doc.docid: doc.s for doc in docs}
    by_s = sorted(s, key=lambda x: -s[x])  # ties cannot occur with these ratings
    uncertain = [x for x in by_s if eps < s[x] < 1 - eps]
    assert step.uncertain == len(uncertain)
    chosen = [x for x in by_s if s[x] > eps] if step.phase == "final" else uncertain
    assert [x for w in step.windows for x in w] == chosen[: len(step.windows) * m]
    assert all(len(w) == m for w in step.windows[:-1])
    assert (step.phase == "final") == (len(uncertain) < tau)


@pytest.mark.parametrize("n", [7, 21, 100])
def test_adaptive_and_final_groups_follow_s(n):
    out, _, steps = run("acurank", n, reverse=True)
    adaptive = [s for s in steps if s.phase in ("adaptive", "final")]
    assert adaptive and (adaptive[-1].phase == "final") == (out.stop == "tau")
    for step in adaptive:
        _check_groups(step, 0.01, 10)


def test_uncertain_set_of_exactly_tau_is_not_final(sample):
    """|C| = tau continues adaptively; only |C| < tau triggers the final pass (DL19, simulated reranker)."""
    from acurank_cli.io.candidates import read_candidates
    from acurank_cli.io.collection_files import read_qrels

    bundle, _ = read_candidates(sample / "dl19" / "bm25.run")
    qrels = read_qrels(sample / "dl19" / "qrels.txt")
    steps: list[Step] = []
    tasks = [RankingTask(q, "", c) for q, c in bundle.runs.items()]
    list(Driver(build_strategy("acurank"), SimulatedReranker(qrels), {}, on_step=lambda t, s: steps.append(s)).run(tasks))
    at_tau = [s for s in steps if s.uncertain == 10]
    assert at_tau, "no iteration with |C| = tau: the test would not test anything"
    assert all(s.phase == "adaptive" for s in at_tau)
    assert all(s.phase == "final" for s in steps if s.uncertain is not None and s.uncertain < 10)


@pytest.mark.parametrize("n", [1, 5, 9, 10])
def test_threshold_when_n_at_most_k(n):
    rng = np.random.default_rng(n)
    mu = rng.uniform(5, 30, n)
    sigma = mu / 3
    assert threshold(mu, sigma, 10) == float(np.min(mu - Z_999 * sigma))  # n <= k, n = k included


def test_threshold_just_above_k_solves_the_equation():
    mu = np.linspace(10, 30, 11)
    sigma = mu / 3
    t = threshold(mu, sigma, 10)
    from scipy.special import ndtr

    assert abs(float(np.sum(ndtr((mu - t) / sigma))) - 10) < 1e-9 and t != float(np.min(mu - Z_999 * sigma))


# --- TourRank and TrueSkill-Static stages -------------------------------------------------------


@pytest.mark.parametrize("n, sizes", [
    (100, [20] * 5 + [10] * 5 + [20, 10, 5]),  # 13 calls
    (101, [17, 17, 17, 17, 17, 16] + [10] * 5 + [20, 10, 5]),  # stage 1 in ceil(101/20) = 6 groups
    (21, [5, 4, 4, 4, 4] + [20, 10, 5]),  # no stage 1 (n <= 50); stage 2 on all 21
    (10, [10, 5]),  # stages 4 and 5 only
    (7, [7, 5]),
    (2, []),  # n <= 2: no stage
])
def test_tourrank_stages(n, sizes):
    out, windows, steps = run("tourrank-1", n)
    assert [len(w) for w in windows] == sizes and out.tally.calls == len(sizes)
    if n in (100, 101):  # stage 1 groups interleave first-stage positions g, g + G, g + 2G, ...
        groups = -(-n // 20)
        stage1 = [set(w) for w in windows[:groups]]
        assert stage1 == [{f"d{i}" for i in range(g, n, groups)} for g in range(groups)]


@pytest.mark.parametrize("n, sizes", [
    (100, [20] * 5 + [20] * 2 + [20] * 2 + [20]),  # stages: top 100, 40, 40, 20 in groups of 20
    (21, [20] * 4),  # each stage: top 21 in groups 20 + 1; the 1-document group is never sent
    (7, [7] * 4),
])
def test_trueskill_static_stages(n, sizes):
    out, windows, _ = run("ts-5-2-2-1", n)
    assert [len(w) for w in windows] == sizes and out.tally.calls == len(sizes)
    # stage 1 sees the first-stage order; later stages take the current top by mu (after the updates)
    stage1 = [d((s, min(s + 20, n))) for s in range(0, min(n, 100), 20) if min(s + 20, n) - s >= 2]
    assert windows[: len(stage1)] == stage1
    if n == 7:  # one window, answered in presented order: mu keeps that order, every stage the same
        assert windows == [d((0, 7))] * 4


@pytest.mark.parametrize("budget", range(1, 13))
def test_budget_counts_groups_across_iterations(budget):
    """B caps the adaptive groups over all iterations: when B stops a query, exactly B groups were reranked
    (the last step truncated to B - iteration, whatever iteration it came in)."""
    for n, reverse in ((100, True), (100, False), (45, True)):
        out, _, steps = run("acurank", n, reverse=reverse, budget=budget)
        groups = sum(len(s.windows) for s in steps if s.phase in ("adaptive", "final"))
        assert groups <= budget
        if out.stop == "budget":
            assert groups == budget


def test_snapshot_ranks_and_fields():
    """The trace snapshot: t, and every document's mu, sigma, s and rank (1 = highest mu), by rank."""
    _, _, steps = run("acurank", 30, reverse=True)
    for step in (steps[1], steps[-1]):
        snap = step.snapshot()
        docs = snap.docs
        assert isinstance(snap.t, float) and len(docs) == 30
        assert [d.rank for d in docs] == list(range(1, 31))
        mus = [d.mu for d in docs]
        assert mus == sorted(mus, reverse=True) and all(0.0 <= d.s <= 1.0 for d in docs)
        assert abs(sum(d.s for d in docs) - 10) < 1e-9  # sum_i s_i = k at the threshold t


# --- the method registry: names -> parameters, as the README's table states them ----------------


@pytest.mark.parametrize("name, eps, tau, cap, rounds", [
    ("acurank", 0.01, 10, None, None), ("acurank-H", 1e-4, 10, None, None), ("acurank-HH", 1e-4, 5, None, None),
    ("acurank-h", 1e-4, 10, None, None), ("acurank-9", 0.01, 10, 9, None), ("acurank-H-20", 1e-4, 10, 20, None),
    ("acurank-r3", 0.01, 10, None, 3), ("acurank-HH-r5", 1e-4, 5, None, 5),
])
def test_acurank_variants(name, eps, tau, cap, rounds):
    p = build_strategy(name).params
    assert (p.eps, p.tau, p.cap, p.max_rounds, p.k, p.m, p.budget) == (eps, tau, cap, rounds, 10, 20, 100)
    q = build_strategy(name, eps=0.2, tau=3, k=5, m=10, seed=4, **({} if cap else {"budget": 7})).params
    assert (q.eps, q.tau, q.k, q.m, q.budget, q.seed, q.cap) == (0.2, 3, 5, 10, 100 if cap else 7, 4, cap)
    if cap:  # the cap N sets the budget: one given with it was dropped in silence
        with pytest.raises(InputError, match=f"^method '{name}' caps its calls at the N of its name"):
            build_strategy(name, budget=7)


def test_baseline_options():
    sw = build_strategy("sw-3", m=10)
    assert (sw.passes, sw.m, sw.stride) == (3, 10, 5) and build_strategy("sw-2").stride == 10
    ts = build_strategy("ts-5-3-3-3", m=10, init="zscore")
    assert (ts.stages, ts.m, ts.init.value) == ((5, 3, 3, 3), 10, "zscore")
    assert build_strategy("ts-2").stages == (2,) and build_strategy("ts-2").m == 20
    tr = build_strategy("tourrank-2", seed=7)
    assert (tr.tournaments, tr.seed) == (2, 7)
    for bad in ("acurank-x", "sw", "sw-0x", "tourrank", "ts-", "bm25"):
        with pytest.raises(Exception, match="unknown method"):
            build_strategy(bad)
    with pytest.raises(Exception, match=r"^method 'acurank' is not a baseline: use 'acurank rerank --method acurank'"):
        build_strategy("acurank", baseline_only=True)  # baseline accepts baselines only, and says where the rest go


def test_tourrank_seed_changes_presentation_not_stage_sizes():
    _, a, _ = run("tourrank-1", 100)
    rr = Scripted()
    list(Driver(build_strategy("tourrank-1", seed=3), rr, {}).run([task(100)]))
    assert [len(w) for w in a] == [len(w) for w in rr.windows]
    assert [set(w) for w in a[:5]] == [set(w) for w in rr.windows[:5]]  # same groups (interleaved)
    assert a[:5] != rr.windows[:5]  # presented in another (seeded) order


def test_random_partition_and_topk_stable_stop():
    # random partition: the same uncertain set per iteration as cut in s order, shuffled with the seed
    _, _, seq = run("acurank", 100, reverse=True, budget=6)
    _, _, rnd = run("acurank", 100, reverse=True, budget=6, partition="random", seed=1)
    s1 = [s for s in seq if s.phase in ("adaptive", "final")][0]
    s2 = [s for s in rnd if s.phase in ("adaptive", "final")][0]
    assert s1.uncertain == s2.uncertain and sorted(x for w in s1.windows for x in w) == sorted(x for w in s2.windows for x in w)
    assert s1.windows != s2.windows
    _, _, again = run("acurank", 100, reverse=True, budget=6, partition="random", seed=1)
    assert [s.windows for s in again] == [s.windows for s in rnd]  # seeded
    # top-k stable: no final pass; it stops when the top-k by mu did not change after an iteration
    out, _, steps = run("acurank", 100, stop="topk-stable")
    assert out.stop in ("topk-stable", "budget") and all(s.phase != "final" for s in steps)
