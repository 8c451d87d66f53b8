"""acurank-auto: the agreement score and the model choice by hand, the transitive certificate and the
presentation order on hand-built graphs, a consistent reranker (certified, exact top k, the calls derived)
and a self-contradicting one (the learned noise rises, nothing is certified), the pooled run's independence
from query order and batching, the resume that replays, and the CLI's options and errors."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import trueskill
from scipy.optimize import brentq
from scipy.stats import norm

from acurank_cli.errors import InputError
from acurank_cli.io.candidates import read_candidates
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.method.auto import Evidence, agreement, agreements, certified_top, present
from acurank_cli.method.graph import TournamentGraph
from acurank_cli.method.acurank_params import beta_grid
from acurank_cli.method.registry import build_strategy
from acurank_cli.params import NotAnOption
from acurank_cli.params import ParameterError
from acurank_cli.records import Phase, RankingTask, StopReason
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from acurank_cli.run.driver import Driver
from conftest import acurank, small_run, torn_copy
from scripted import by_index, drive, reverse, task

LOG2_3 = math.log2(3)


def test_agreement_worked_example():
    """Presented a, b, c; answer a > b > c; a model whose mu puts b first: the predicted order b, a, c holds
    answer positions 1, 0, 2. Gains and discounts 1/log2(2 + p): 1, 1/log2 3, 1/2. DCG = g1 d0 + g0 d1 + g2 d2
    = 1/log2 3 + 1/log2 3 + 1/4; ideal = 1 + 1/(log2 3)^2 + 1/4."""
    mu = np.array([5.0, 6.0, 1.0])  # a, b, c
    dcg = 1 / LOG2_3 + 1 / LOG2_3 + 0.25
    ideal = 1 + 1 / LOG2_3 ** 2 + 0.25
    assert agreement(mu, [0, 1, 2], [0, 1, 2]) == pytest.approx(dcg / ideal, abs=1e-15)
    assert dcg / ideal == pytest.approx(0.917350, abs=1e-6)
    assert agreement(np.array([3.0, 2.0, 1.0]), [0, 1, 2], [0, 1, 2]) == 1.0  # a perfect prediction
    # the same documents presented c, a, b (window [2, 0, 1]); answer positions (1, 2, 0) = a, b, c: perfect too
    assert agreement(np.array([3.0, 2.0, 1.0]), [2, 0, 1], [1, 2, 0]) == 1.0
    # ties in mu are predicted in presented order (what the model knew), not in the answer's: presented a, b, c,
    # answer c > a > b: predicted a, b, c at answer positions 1, 2, 0: DCG = g1 + g2 d1 + g0 d2
    assert agreement(np.array([1.0, 1.0, 1.0]), [0, 1, 2], [2, 0, 1]) == pytest.approx(
        (1 / LOG2_3 + 0.5 / LOG2_3 + 0.5) / ideal, abs=1e-15)


def test_agreements_of_every_model_are_each_models_agreement():
    rng = np.random.default_rng(3)
    mu = rng.normal(0, 1, (7, 30))
    mu[2, :5] = mu[2, 5]  # ties: presented order
    window, perm = [int(i) for i in rng.permutation(30)[:12]], [int(j) for j in rng.permutation(12)]
    assert list(agreements(mu, window, perm)) == [agreement(row, window, perm) for row in mu]
    rows = np.tile(np.array([5.0, 6.0, 1.0]), (2, 1))
    assert list(agreements(rows, [0, 1, 2], [0, 1, 2])) == [agreement(rows[0], [0, 1, 2], [0, 1, 2])] * 2


def test_evidence_choice_by_hand():
    ev = Evidence(5, start=2)
    assert ev.choice() == 2  # nothing yet: the start
    ev.add(np.array([0.5, 0.5, 0.5, 0.5, 0.5]))
    assert ev.choice() == 2  # every model alike: still the start
    ev.add(np.array([0.0, 0.3, 0.3, 0.3, 0.1]))
    assert ev.choice() == 2  # models 1, 2, 3 tied best: the middle one
    ev.add(np.array([0.0, 0.0, 0.0, 0.2, 0.0]))
    assert ev.choice() == 3
    ev.add(np.array([0.0, 0.25, 0.0, 0.0, 0.0]))
    assert ev.choice() == 1  # 1.05 against 1.0


def test_beta_grid_parsing_and_errors():
    assert beta_grid("1/16,1/8,*1/4,1/2,1,2,4") == ((1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2.0, 4.0), 2)
    assert beta_grid("0.5,1,2") == ((0.5, 1.0, 2.0), 0)  # no mark: the first
    for bad in ("", "1,1", "2,1", "0,1", "-1,2", "1/0", "*1,*2", "a", "1,,2", "inf"):
        with pytest.raises(ParameterError, match="beta_grid"):
            beta_grid(bad)
    p = build_strategy("acurank-auto", beta_grid=" 1/4, *1 ").params
    assert (p.factors, p.start, p.beta_grid) == ((0.25, 1.0), 1, "1/4,*1")


def graph_of(n: int, *answers) -> TournamentGraph:
    g = TournamentGraph(n)
    for a in answers:
        g.add_order(a)
    return g


def test_closure_and_its_counts_follow_the_definition():
    """Random answers, some contradicting each other, on small lists: the kept closure is the reachability of the
    edges given (found here by a search from each candidate), and the counts kept as edges arrive are the
    definition's (graph.py: A(u), D(u) without u itself; s = |A & D|; in = |A| - s, out = |D| - s; resolved
    when |A | D| >= n - 1; a component's earliest member), after every answer."""
    rng = np.random.default_rng(11)
    for trial in range(60):
        n = int(rng.integers(2, 9))
        g, edges = TournamentGraph(n), set()
        for _ in range(int(rng.integers(1, 6))):
            answer = [int(i) for i in rng.permutation(n)[: int(rng.integers(2, n + 1))]]
            g.add_order(answer)
            edges |= set(zip(answer, answer[1:]))
            down = []
            for u in range(n):  # D(u) by depth-first search, paths of length >= 1
                seen, stack = set(), [v for (a, v) in edges if a == u]
                while stack:
                    v = stack.pop()
                    if v not in seen:
                        seen.add(v)
                        stack += [w for (a, w) in edges if a == v]
                down.append(seen)
            assert [[v in down[u] for v in range(n)] for u in range(n)] == g.reach.tolist()
            lv = g.levels()
            for u in range(n):
                d = down[u] - {u}
                a = {w for w in range(n) if u in down[w]} - {u}
                s = len(a & d)
                assert (lv.n_in[u], lv.n_out[u], lv.s[u]) == (len(a) - s, len(d) - s, s), (trial, u)
                assert lv.resolved[u] == (len(a | d) >= n - 1)
                assert lv.component[u] == min({u} | (a & d))


def test_certificate_on_hand_built_graphs():
    """Two chains 0 > 1 > 2 and 3 > 4 > 5, joined by 2 > 3: a total order, each rank proven. Joined by 1 > 3
    instead: 0 and 1 are above everything, 2 is unrelated to 3, 4, 5 (its rank is not proven)."""
    mu = np.zeros(6)
    total = graph_of(6, [0, 1, 2], [3, 4, 5], [2, 3])
    assert certified_top(total, mu, 3) == [0, 1, 2] and certified_top(total, mu, 6) == [0, 1, 2, 3, 4, 5]
    partial = graph_of(6, [0, 1, 2], [3, 4, 5], [1, 3])
    assert certified_top(partial, mu, 2) == [0, 1]
    assert certified_top(partial, mu, 3) is None
    # a contradiction 0 > 1, 1 > 0 puts both on a cycle: nothing is proven through it
    cycle = graph_of(3, [0, 1, 2], [1, 0])
    assert list(cycle.levels().s) == [1, 1, 0] and certified_top(cycle, mu[:3], 1) is None
    assert certified_top(cycle, mu[:3], 3) is None
    # before any answer nothing is resolved; k > n certifies all n once they are
    assert certified_top(graph_of(3), mu[:3], 1) is None
    assert certified_top(graph_of(2, [1, 0]), mu[:2], 5) == [1, 0]


def test_presentation_agrees_with_the_answers_so_far():
    """Window (5, 0, 3, 1): the answers proved 1 > 0 and 3 > 5 > 0; a document's ancestors within the window
    come first (1 and 3 have none, 5 has one, 0 has three), ties by mu (3's mu above 1's)."""
    g = graph_of(6, [1, 0], [3, 5, 0])
    mu = np.array([0.0, 1.0, 0.0, 2.0, 0.0, 9.0])
    assert present([5, 0, 3, 1], g.reach, mu) == [3, 1, 5, 0]
    assert present([4, 2], g.reach, mu) == [4, 2]  # unrelated, equal mu: as given


def reference_uncertain(scores, answers, beta, k, eps):
    """C = {eps < s_i < 1 - eps} from the spec's references: trueskill.TrueSkill(beta).rate per answer, the
    threshold t with sum_i P(x_i > t) = k by brentq on scipy's normal cdf."""
    env = trueskill.TrueSkill(beta=beta)
    mu = np.array(scores, dtype=float)
    sigma = mu / 3
    for order in answers:
        new = env.rate([(env.create_rating(mu[i], sigma[i]),) for i in order])
        for i, (r,) in zip(order, new):
            mu[i], sigma[i] = r.mu, r.sigma
    t = brentq(lambda x: norm.sf((x - mu) / sigma).sum() - k, mu.min() - 50 * sigma.max(), mu.max() + 50 * sigma.max(),
               xtol=1e-13)
    s = norm.sf((t - mu) / sigma)
    return {i for i in range(len(mu)) if eps < s[i] < 1 - eps}


def test_consistent_reranker_is_certified_with_the_exact_top_k_after_the_derived_calls():
    """n = 40 (scores 50, 49.7, ...), m = 20, k = 10, eps = 0.01 (acurank-auto-N's), a reranker that agrees
    with the first stage everywhere.
    The initial pass (2 calls) proves two chains d0 > ... > d19 and d20 > ... > d39 and no more; nothing is
    certified (d0 is related to 19 of 39). The first adaptive iteration uses the start model, beta = 1/4 of
    the median initial sigma, and sends C (from the references below) in one window: it holds d20 and chain
    one's d9..d19, so its answer proves d9 > ... > d20 > chain two, every one of d0..d9 is then related to all
    39 others with no cycle, and the query stops certified: 3 calls, top 10 = d0..d9 in order."""
    t = task(40)
    scores = [c.score for c in t.candidates]
    chains = [list(range(20)), list(range(20, 40))]
    beta = 0.25 * float(np.median(np.array(scores) / 3))
    c = reference_uncertain(scores, chains, beta, 10, 0.01)
    assert 20 in c and max(c) < 40 and len(c) <= 20 and any(9 <= i < 20 for i in c)
    steps, ranking = drive(build_strategy("acurank-auto", beta_pool="query", eps=0.01), t, answer=by_index)
    sent = [s for s, _ in steps if s.windows]
    assert [s.phase for s in sent] == [Phase.initial, Phase.adaptive] and len(sent[1].windows) == 1
    assert {int(d[1:]) for d in sent[1].windows[0]} == c
    assert sum(len(s.windows) for s in sent) == 3
    done = steps[-1][0]
    assert done.phase is Phase.done and done.stop is StopReason.certified
    assert [r.docid for r in ranking[:10]] == [f"d{i}" for i in range(10)]
    # the window is presented in an order the first answers agree with: each chain's members in chain order
    window = [int(d[1:]) for d in sent[1].windows[0]]
    assert [i for i in window if i < 20] == sorted(i for i in window if i < 20)
    assert [i for i in window if i >= 20] == sorted(i for i in window if i >= 20)


def test_final_pass_when_fewer_than_tau_are_uncertain():
    """The same first adaptive iteration (|C| as derived above): tau = |C| leaves it adaptive (over C);
    tau = |C| + 1 makes it the final pass, over {s_i > eps} (C and the confident top)."""
    t = task(40)
    scores = [c.score for c in t.candidates]
    beta = 0.25 * float(np.median(np.array(scores) / 3))
    c = reference_uncertain(scores, [list(range(20)), list(range(20, 40))], beta, 10, 0.01)
    for tau, phase in ((len(c), Phase.adaptive), (len(c) + 1, Phase.final)):
        steps, _ = drive(build_strategy("acurank-auto", beta_pool="query", eps=0.01, tau=tau), t, answer=by_index)
        first = [s for s, _ in steps if s.windows][1]
        assert first.phase is phase and first.uncertain == len(c)
        sent = {int(d[1:]) for w in first.windows for d in w}
        assert sent == c if phase is Phase.adaptive else sent > c


def test_a_list_within_one_window_is_certified_by_its_first_call():
    """n <= m: the initial pass is one window, whose answer orders every candidate: certified, 1 call, the
    answer's order."""
    steps, ranking = drive(build_strategy("acurank-auto"), task(7), answer=reverse)
    assert [s.phase for s, _ in steps] == [Phase.initial, Phase.done] and steps[-1][0].stop is StopReason.certified
    assert [r.docid for r in ranking] == [f"d{i}" for i in range(6, -1, -1)]


def last_first(window):
    """A consistent reranker that disagrees with the first stage: the true order is d{n-1} > ... > d0."""
    return tuple(sorted(range(len(window)), key=lambda j: -int(window[j][1:])))


def test_self_contradicting_reranker_is_never_certified():
    """A reranker that returns every window reversed: each adaptive window is presented in the order the
    answers so far proved (graph-consistent), so its answer reverses every relation it re-tests: 2-cycles,
    and nothing is certified through them; the query ends on its budget. A reranker as far from the first
    stage but consistent (the true order reversed) is best predicted by the models that follow its answers:
    on the seven-value grid it ends on a beta below the start; on the default five-value grid on one no larger
    (at n = 60 the start keeps the lead by 0.02 of summed agreement over 1/16: the choices along the way differ,
    so the windows sent do too). (Which model the agreement favours is pinned by the worked example and
    test_learned_noise_follows_the_reranker; this end state alone does not fail when the agreement's sign is
    flipped.)"""
    for n in (40, 60, 100):
        for eps, budget in ((0.01, 100), (1e-4, 50)):
            strategy = build_strategy("acurank-auto", beta_pool="query", eps=eps, budget=budget)
            steps, _ = drive(strategy, task(n), answer=reverse)
            assert steps[-1][0].stop is StopReason.budget and all(s.stop is not StopReason.certified for s, _ in steps)
            assert sum(len(s.windows) for s, _ in steps if s.phase is not Phase.initial) == budget
    for grid, below in (("1/16,1/8,*1/4,1/2,1,2,4", True), (None, False)):
        for n in (60, 100):
            strategy = build_strategy("acurank-auto", beta_pool="query", **({"beta_grid": grid} if grid else {}))
            consistent, _ = drive(strategy, task(n), answer=last_first)
            start = 0.25 * float(np.median([c.score / 3 for c in task(n).candidates]))
            assert consistent[-1][0].beta < start if below else consistent[-1][0].beta <= start


@pytest.fixture(scope="module")
def dl19(sample):
    bundle, _ = read_candidates(sample / "dl19" / "bm25.run")
    tasks = [RankingTask(q, "", c) for q, c in bundle.runs.items()][:12]
    return tasks, read_qrels(sample / "dl19" / "qrels.txt")


def outcomes(method, tasks, qrels, batch=1, noise=1.0, **opts):
    driver = Driver(build_strategy(method, **opts), SimulatedReranker(qrels, noise=noise), batch_queries=batch)
    return {o.qid: o for o in driver.run(tasks)}


def same(a, b):
    return a.keys() == b.keys() and all(
        [r.docid for r in a[q].ranking] == [r.docid for r in b[q].ranking] and a[q].tally.calls == b[q].tally.calls
        and a[q].beta == b[q].beta for q in a)


def test_pooled_run_is_independent_of_query_order_and_batching(dl19):
    tasks, qrels = dl19
    out = outcomes("acurank-auto-9", tasks, qrels)
    assert all(o.tally.calls <= 9 for o in out.values())
    # pooled: every query ends with the run's choice, scaled by its own median sigma
    factors = {round(o.beta / float(np.median([c.score / 3 for c in t.candidates])), 9) for t, o in
               zip(tasks, out.values())}
    assert len(factors) == 1
    shuffled = list(tasks)
    random.Random(1).shuffle(shuffled)
    for order, batch in ((shuffled, 1), (tasks, 5)):
        assert same(outcomes("acurank-auto-9", order, qrels, batch=batch), out)
    # per query, the choice depends on the query alone: the same with any other queries around it
    alone = outcomes("acurank-auto-9", tasks[:3], qrels, beta_pool="query")
    assert same(alone, {q: o for q, o in outcomes("acurank-auto-9", tasks, qrels, beta_pool="query").items() if q in alone})


def test_learned_noise_follows_the_reranker(dl19):
    """Pooled over the run: the simulated reranker at noise 0 chooses a smaller beta than at noise 1."""
    tasks, qrels = dl19
    calm = outcomes("acurank-auto-9", tasks, qrels, noise=0.0)
    noisy = outcomes("acurank-auto-9", tasks, qrels, noise=1.0)
    q = tasks[0].qid
    assert calm[q].beta < noisy[q].beta
    assert sum(o.stop is StopReason.certified for o in calm.values()) > 0
    assert not any(o.stop is StopReason.certified for o in noisy.values())


def test_variant_defaults():
    """acurank-auto: eps 1e-4 and B = 50; acurank-auto-N: acurank's eps 0.01 within its cap; given values win."""
    assert (build_strategy("acurank-auto").params.eps, build_strategy("acurank-auto").params.budget) == (1e-4, 50)
    assert build_strategy("acurank-auto-9").params.eps == 0.01 and build_strategy("acurank-auto-9").params.cap == 9
    assert build_strategy("acurank-auto-9", eps=0.2).params.eps == 0.2


def test_options_and_errors():
    s = build_strategy("acurank-auto-9", k=5, eps=0.001, tau=4, m=10, init="zscore", sigma="mu/2", beta_pool="query")
    assert (s.params.cap, s.params.k, s.params.m, s.params.beta_pool.value, s.lockstep) == (9, 5, 10, "query", False)
    assert build_strategy("acurank-auto").lockstep and build_strategy("acurank-auto").cutoff == 10
    with pytest.raises(NotAnOption, match=r"does not use partition"):
        build_strategy("acurank-auto", partition="random")
    with pytest.raises(ParameterError, match="beta_pool"):
        build_strategy("acurank-auto", beta_pool="everything")
    with pytest.raises(InputError, match="acurank-auto-3: query q has 100 candidates"):
        build_strategy("acurank-auto-3").check(task(100))


def test_cli_run_stats_and_resume(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=4)
    qrels = sample / "dl19" / "qrels.txt"
    args = ["rerank", run, "--method", "acurank-auto-9", "--reranker", "simulated", "--qrels", qrels]
    full = tmp_path / "full.run"
    proc = acurank(*args, "--output", full)
    assert "acurank-auto-9 with reranker simulated" in proc.stderr
    recs = [json.loads(x) for x in (tmp_path / "full.stats.jsonl").read_text().splitlines()]
    assert all(r["calls"] <= 9 and r["beta"] > 0 for r in recs)
    assert recs[0]["params"]["beta_grid"] == "1/16,1/8,*1/4,1,4" and recs[0]["params"]["beta_pool"] == "run"
    assert all(it["phase"] != "wait" for r in recs for it in r["iterations"])  # waits send nothing: not steps
    text = full.read_text()
    part, stats = torn_copy(full, qids, keep=2)  # two whole queries written
    proc = acurank(*args, "--output", part, "--stats", stats)
    assert "2 of 4" in proc.stderr and "replayed" in proc.stderr
    assert part.read_text() == text
    bad = acurank(*args, "--beta-grid", "1,1", check=False)
    assert bad.returncode == 2 and "--beta-grid 1,1: must be increasing positive multiples" in bad.stderr
    bad = acurank(*args, "--partition", "random", check=False)
    assert bad.returncode == 2 and "method 'acurank-auto-9' does not use --partition" in bad.stderr
