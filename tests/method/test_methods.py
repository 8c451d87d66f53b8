"""Strategies with the simulated reranker: spec vectors, call counts, and the DL23 reference figures."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict

import pytest

from acurank_cli.run.driver import Driver
from acurank_cli.evaluation import evaluate
from acurank_cli.io.candidates import read_candidates
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.records import RankingTask
from acurank_cli.rerankers.backends.simulated import SimulatedReranker, simulated_order, simulated_scores
from acurank_cli.method.registry import build_strategy

from conftest import DATA


def test_simulated_reranker_vectors():
    vectors = json.loads((DATA / "simulated-reranker-vectors.json").read_text())
    assert vectors
    for v in vectors:
        grades = dict(zip(v["window"], v["grades"]))
        scores = simulated_scores(str(v["qid"]), v["window"], grades, v["noise"], 0)
        assert max(abs(a - b) for a, b in zip(scores, v["scores"])) < 1e-12
        assert list(simulated_order(str(v["qid"]), v["window"], grades, v["noise"], 0)) == v["perm"]


@pytest.fixture(scope="module")
def dl19(sample):
    bundle, _ = read_candidates(sample / "dl19" / "bm25.run")
    qrels = read_qrels(sample / "dl19" / "qrels.txt")
    tasks = [RankingTask(q, "", c) for q, c in bundle.runs.items()]
    return tasks, qrels


def run_method(method, tasks, qrels, **opts):
    return list(Driver(build_strategy(method, **opts), SimulatedReranker(qrels)).run(tasks))


@pytest.mark.parametrize("method,calls", [("sw-1", 9), ("sw-2", 18), ("tourrank-1", 13), ("tourrank-2", 26), ("ts-5-2-2-1", 10)])
def test_fixed_call_counts_on_n100(dl19, method, calls):
    tasks, qrels = dl19
    outs = run_method(method, tasks[:6], qrels)
    assert [o.tally.calls for o in outs] == [calls] * 6
    assert all(len(o.ranking) == 100 and len({r.docid for r in o.ranking}) == 100 for o in outs)


def test_acurank_9_at_most_9_calls_and_5_initial(dl19):
    tasks, qrels = dl19
    outs = run_method("acurank-9", tasks, qrels)
    assert all(o.tally.calls <= 9 for o in outs)
    assert all(o.iterations[0].phase == "initial" and o.iterations[0].groups == 5 for o in outs)
    assert statistics.mean(o.tally.calls for o in outs) > 8.5


def test_acurank_stats_follow_the_uncertain_set(dl19):
    tasks, qrels = dl19
    (out,) = run_method("acurank", tasks[:1], qrels)
    adaptive = [it for it in out.iterations if it.phase in ("adaptive", "final")]
    assert adaptive and all(it.uncertain is not None for it in adaptive)
    for it in adaptive:
        if it.phase == "adaptive":
            assert it.groups == -(-it.uncertain // 20)
    assert out.tally.calls == sum(sum(1 for s in it.window_sizes if s >= 2) for it in out.iterations)
    assert out.tally.docs_sent == sum(s for it in out.iterations for s in it.window_sizes if s >= 2)
    scores = [r.score for r in out.ranking]
    assert all(a > b for a, b in zip(scores, scores[1:]))


def test_small_lists_and_budget(dl19):
    tasks, qrels = dl19
    task = RankingTask(tasks[0].qid, "", tasks[0].candidates[:7])
    (out,) = run_method("acurank", [task], qrels)
    assert len(out.ranking) == 7 and out.tally.calls >= 2  # initial window + final pass on n <= k
    (capped,) = run_method("acurank", tasks[:1], qrels, budget=2)
    assert capped.tally.calls <= 5 + 2
    single = RankingTask("x", "", tasks[0].candidates[:1])
    (one,) = run_method("sw-1", [single], qrels)
    assert one.tally.calls == 0 and [r.docid for r in one.ranking] == [tasks[0].candidates[0].docid]


def test_batching_across_queries_changes_nothing(dl19):
    tasks, qrels = dl19
    one = list(Driver(build_strategy("acurank"), SimulatedReranker(qrels)).run(tasks[:5]))
    batched = list(Driver(build_strategy("acurank"), SimulatedReranker(qrels), batch_queries=4).run(tasks[:5]))
    assert [o.qid for o in batched] == [t.qid for t in tasks[:5]]
    assert [(o.ranking, o.tally.calls) for o in one] == [(o.ranking, o.tally.calls) for o in batched]


# --- DL23 against the published implementation (reference-dl23-perquery.tsv) ----------------------

REFERENCE = defaultdict(dict)
with open(DATA / "reference-dl23-perquery.tsv") as fh:
    for row in csv.DictReader(fh, delimiter="\t"):
        REFERENCE[row["method"]][row["qid"]] = (int(row["calls"]), float(row["ndcg10"]))


@pytest.fixture(scope="module")
def dl23(dl23_candidates):
    bundle, _ = read_candidates(dl23_candidates)
    tasks = [RankingTask(q, bundle.topics[q], c) for q, c in bundle.runs.items()]
    return tasks, bundle.qrels


@pytest.mark.parametrize("method", ["sw-1", "sw-2", "tourrank-1", "ts-5-2-2-1", "acurank-9", "acurank"])
def test_dl23_matches_reference(dl23, method):
    tasks, qrels = dl23
    outs = run_method(method, tasks, qrels)
    run = {o.qid: {r.docid: r.score for r in o.ranking} for o in outs}
    ndcg = evaluate(run, qrels).mean("ndcg_cut_10")
    ref = REFERENCE[method]
    same_calls = sum(ref[o.qid][0] == o.tally.calls for o in outs)
    assert same_calls >= 0.9 * len(ref)
    assert abs(ndcg - statistics.mean(v[1] for v in ref.values())) <= 0.01
    if method.startswith("sw"):  # identical rankings: per-query nDCG equal
        per_query = evaluate(run, qrels).per_query
        assert all(abs(per_query[q]["ndcg_cut_10"] - ref[q][1]) < 1e-5 for q in ref)


def test_dl23_sw1_rankings_identical(dl23):
    import gzip

    tasks, qrels = dl23
    outs = {o.qid: [r.docid for r in o.ranking] for o in run_method("sw-1", tasks, qrels)}
    with gzip.open(DATA / "reference-dl23-sw-1.jsonl.gz", "rt") as fh:
        lines = fh.read().splitlines()
    assert len(lines) == 82
    for line in lines:
        rec = json.loads(line)
        assert outs[rec["qid"]] == rec["ranking"]


def test_ablations_partition_stop_init(dl19):
    tasks, qrels = dl19
    tasks = tasks[:6]
    base = run_method("acurank", tasks, qrels)
    rand = run_method("acurank", tasks, qrels, partition="random", seed=1)
    again = run_method("acurank", tasks, qrels, partition="random", seed=1)
    assert [o.ranking for o in rand] == [o.ranking for o in again]  # seeded
    assert [o.ranking for o in rand] != [o.ranking for o in base]
    stable = run_method("acurank", tasks, qrels, stop="topk-stable")
    assert all(it.phase != "final" for o in stable for it in o.iterations)
    assert sum(o.tally.calls for o in stable) < sum(o.tally.calls for o in base)
    uniform = run_method("acurank", tasks, qrels, init="uniform")
    assert [o.ranking for o in uniform] != [o.ranking for o in base]
    zscore = run_method("acurank", tasks, qrels, init="zscore")
    assert all(len(o.ranking) == 100 for o in zscore)


def test_parameters_k_eps_tau_window(dl19):
    tasks, qrels = dl19
    (small_window,) = run_method("acurank", tasks[:1], qrels, m=10)
    assert small_window.iterations[0].groups == 10
    assert max(max(it.window_sizes) for it in small_window.iterations) == 10
    (tight,) = run_method("acurank", tasks[:1], qrels, eps=0.2, tau=3)
    (loose,) = run_method("acurank", tasks[:1], qrels, eps=1e-4, tau=3)
    assert tight.tally.calls < loose.tally.calls
    (k5,) = run_method("acurank", tasks[:1], qrels, k=5)
    assert k5.tally.calls >= 5


def _stop(method, n, **opts):
    from acurank_cli.records import Candidate

    task = RankingTask("q", "", tuple(Candidate(f"d{i}", 100.0 - i) for i in range(n)))
    (out,) = list(Driver(build_strategy(method, **opts), SimulatedReranker({"q": {}})).run([task]))
    return out


def test_stop_reasons_by_hand():
    # n = 1: n <= k, so t = mu - 3.0902 sigma and s = Phi(3.0902) = 0.999 > 1 - eps: C is empty,
    # |C| = 0 < tau: the final pass takes {s > eps} = the one document: stopped by the tau rule.
    assert _stop("acurank", 1).stop == "tau"
    # acurank-2 with n = 40, m = 20: the initial pass spends both calls, B = 2 - ceil(40/20) = 0.
    out = _stop("acurank-2", 40)
    assert (out.stop, out.tally.calls) == ("call-cap", 2)
    # --budget 0: no adaptive group allowed: the budget B stops it.
    assert _stop("acurank", 40, budget=0).stop == "budget"
    # baselines follow a fixed schedule: no stop reason
    assert _stop("sw-1", 40).stop is None
