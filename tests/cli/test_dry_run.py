"""``rerank --dry-run``: every check, no model call, no file but ``--stats``, and the bill. Its rehearsals are the
simulated reranker's runs at other seeds, so the expected figures are real runs' stats (``--sim-seed``), and a
method whose calls never depend on the answers is billed exactly (sliding windows: 9 windows of 20, step 10, over
100 candidates)."""

from __future__ import annotations

import json
import statistics

from conftest import ROOT, acurank
from fake_chat_server import FakeServer

DL19 = ROOT / "sample_runs" / "dl19"
QIDS = "264014,104861,130510,1114819,1110199,1129237"
SIM = ["--reranker", "simulated", "--qrels", DL19 / "qrels.txt", "--qids", QIDS]


def _stats(path) -> tuple[dict, dict]:
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    return {r["qid"]: r for r in lines[:-1]}, lines[-1]["total"]


def test_an_adaptive_methods_bill_is_its_rehearsals_which_are_runs_at_other_seeds(tmp_path):
    bill = tmp_path / "bill.jsonl"
    ran = acurank("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "--dry-run", "--rehearsals", "3",
                  "--stats", bill, "-o", tmp_path / "never.run")
    assert not (tmp_path / "never.run").exists() and "no model called" in ran.stderr
    per_query, total = _stats(bill)
    actual: dict[str, list[int]] = {}
    totals = []
    for seed in (1, 2, 3):  # the rehearsals' seeds: the run's --sim-seed (0) + 1, 2, 3
        stats = tmp_path / f"s{seed}.jsonl"
        acurank("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "--sim-seed", str(seed), "--no-cache",
                "-o", tmp_path / f"s{seed}.run", "--stats", stats)
        rows = [json.loads(l) for l in stats.read_text().splitlines()]
        totals.append(sum(r["calls"] for r in rows))
        for r in rows:
            actual.setdefault(r["qid"], []).append(r["calls"])
    for qid, calls in actual.items():
        assert per_query[qid]["calls"] == {"low": min(calls), "median": statistics.median(calls), "high": max(calls)}
    assert total["calls"] == {"low": min(totals), "median": statistics.median(totals), "high": max(totals)}
    assert total["queries"] == 6 and "noise 1, seeds 1-3" in total["rehearsal"]
    assert any(len(set(c)) > 1 for c in actual.values()) and total["exact"] is False


def test_a_pointwise_backends_rehearsals_draw_each_documents_error_once(tmp_path):
    """MiniLM scores each document alone, so its answers agree across windows: its rehearsals are the simulated
    reranker's runs with the error drawn once per query and document (--sim-persistent 1, no per-window noise), at
    seeds 0, 1, 2 (where noise drawn per window asked for about 2.8 times MiniLM's calls on DL19). A listwise LLM's
    rehearsal keeps the per-window draw. With qrels, the rehearsals take two models of the reranker in turn: the
    qrels (seeds 0 and 2) and each query's BM25 scores standardised by hand here (seed 1)."""
    from acurank_cli.io.candidates import read_candidates
    from acurank_cli.method.registry import build_strategy
    from acurank_cli.records import RankingTask
    from acurank_cli.rerankers.backends.simulated import SimulatedReranker
    from acurank_cli.run.driver import Driver

    bill = tmp_path / "bill.jsonl"
    qrels = ["--qrels", DL19 / "qrels.txt", "--qids", QIDS]
    ran = acurank("rerank", DL19 / "bm25.run", "--method", "acurank", "--reranker", "minilm", *qrels, "--dry-run",
                  "--rehearsals", "3", "--stats", bill)
    per_query, total = _stats(bill)
    actual: dict[str, list[int]] = {}
    for seed in (0, 2):
        stats = tmp_path / f"p{seed}.jsonl"
        acurank("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "--sim-noise", "0", "--sim-persistent", "1",
                "--sim-seed", str(seed), "--no-cache", "-o", tmp_path / f"p{seed}.run", "--stats", stats)
        for r in map(json.loads, stats.read_text().splitlines()):
            actual.setdefault(r["qid"], []).append(r["calls"])
    bundle, _ = read_candidates(DL19 / "bm25.run")
    tasks = [RankingTask(q, "", c) for q, c in bundle.runs.items() if q in QIDS.split(",")]
    first_stage = {}
    for t in tasks:
        scores = [c.score for c in t.candidates]
        mean, sd = statistics.fmean(scores), statistics.pstdev(scores)
        first_stage[t.qid] = {c.docid: (c.score - mean) / sd for c in t.candidates}
    oracle = SimulatedReranker(first_stage, noise=0.0, seed=1, persistent=1.0)
    for out in Driver(build_strategy("acurank"), oracle, None, len(tasks)).run(tasks):
        actual[out.qid].append(out.tally.calls)
    assert len(actual) == 6 and all(len(c) == 3 for c in actual.values())
    for qid, calls in actual.items():
        assert per_query[qid]["calls"] == {"low": min(calls), "median": statistics.median(calls), "high": max(calls)}
    assert "noise 1 drawn once per query and document" in total["rehearsal"] and "drawn once" in ran.stderr
    assert "grades: the qrels given and each query's first-stage scores standardised, in turn" in total["rehearsal"]
    assert any(c[2] != c[0] or c[1] != c[0] for c in actual.values())  # the models differ on some query
    with FakeServer(lambda q, a: ("ok", 0.0)) as server:  # openai: a listwise LLM (never called by a dry run)
        ran = acurank("rerank", DL19 / "bm25.run", "--method", "acurank", "--reranker", "openai:m", "--base-url",
                      server.base_url, *qrels, "--dry-run", "--rehearsals", "2")
        assert server.bodies == []
    assert "(noise 1, seeds 0-1;" in ran.stderr and "drawn once" not in ran.stderr


def test_sliding_windows_are_billed_exactly_and_money_is_tokens_times_prices(tmp_path):
    bill = tmp_path / "bill.jsonl"
    ran = acurank("baseline", DL19 / "bm25.run", "--method", "sw-1", *SIM, "--sim-tokens", "gpt-4o", "--dry-run",
                  "--price-in", "2.5", "--price-out", "10", "--stats", bill)
    per_query, total = _stats(bill)
    assert all(r["calls"] == {"low": 9, "median": 9, "high": 9} for r in per_query.values())
    assert total["calls"] == {"low": 54, "median": 54, "high": 54} and total["exact"] is True
    for r in per_query.values():
        t_in, t_out, money = r["input_tokens"]["median"], r["output_tokens"]["median"], r["money"]["median"]
        assert abs(money - (t_in * 2.5 + t_out * 10) / 1e6) < 1e-5
    lines = ran.stdout.splitlines()
    assert lines[0].split() == ["query", "calls", "input", "tokens", "output", "tokens", "money"]
    assert lines[-1].split()[:2] == ["total", "54"] and "exact calls" in ran.stderr
    # the actual run: the same calls, and input tokens within 3% of the bill (later windows hold other passages)
    stats = tmp_path / "real.jsonl"
    acurank("baseline", DL19 / "bm25.run", "--method", "sw-1", *SIM, "--sim-tokens", "gpt-4o", "--no-cache",
            "-o", tmp_path / "real.run", "--stats", stats)
    for r in (json.loads(l) for l in stats.read_text().splitlines()):
        assert r["calls"] == 9
        predicted = per_query[r["qid"]]["input_tokens"]["median"]
        assert abs(r["input_tokens"] - predicted) / r["input_tokens"] < 0.03, (r["qid"], r["input_tokens"], predicted)


def test_an_llm_dry_run_sends_nothing_and_counts_the_backends_own_prompts(tmp_path):
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        ran = acurank("rerank", DL19 / "bm25.run", "--method", "acurank-9", "--reranker", "openai:gpt-4o-mini",
                      "--base-url", srv.base_url, "--qids", QIDS, "--dry-run", "--instruction", "Prefer numbers.")
        assert srv.bodies == []
    rows = ran.stdout.splitlines()
    assert len(rows) == 1 + 6 + 1 and rows[-1].startswith("total")
    first = rows[1].split()
    assert first[0] == "264014" and int(first[2].replace(",", "")) > 0  # input tokens counted


def test_rehearsal_flags_without_a_dry_run_and_half_a_price_are_refused_in_one_line(tmp_path):
    for args, words in ((["--rehearsals", "3"], "--rehearsals rehearses the bill of --dry-run; add --dry-run"),
                        (["--price-in", "1"], "--price-in and --price-out go together"),
                        (["--dry-run", "--price-in", "1"], "--price-in and --price-out go together"),
                        (["--dry-run", "--rehearsals", "1"], "--rehearsals")):
        ran = acurank("rerank", DL19 / "bm25.run", *SIM, *args, check=False)
        assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
        assert words in ran.stderr, ran.stderr


def test_the_api_estimates_the_same_bill_before_any_call(tmp_path):
    """Reranker.estimate: the API's door to the bill; sw-1 exact at 9 calls a query, tokens from the openai:
    backend's own prompts, nothing sent to the server; money from both prices."""
    import gzip

    from acurank_cli.api import Reranker

    texts = {}
    with gzip.open(DL19 / "passages.jsonl.gz", "rt") as fh:
        for line in fh:
            o = json.loads(line)
            texts[o["_id"]] = o["text"]
    topics = dict(l.split("\t", 1) for l in (DL19 / "topics.tsv").read_text().splitlines())
    run = [l.split() for l in (DL19 / "bm25.run").read_text().splitlines()]
    queries, qids = [], ["264014", "104861"]
    for q in qids:
        docs = [{"id": d, "text": texts[d], "score": float(s)} for qq, _, d, _, s, _ in run if qq == q]
        queries.append((topics[q], docs))
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        with Reranker("openai:gpt-4o-mini", "sw-1", base_url=srv.base_url, cache=None) as rr:
            bill = rr.estimate(queries, qids=qids, price_in=2.5, price_out=10, rehearsals=3)
        assert srv.bodies == []
    assert [q.qid for q in bill.queries] == qids and bill.exact
    assert all((q.calls.low, q.calls.high) == (9, 9) for q in bill.queries) and bill.total.calls.median == 18
    one = bill.queries[0]
    assert one.input_tokens.median > 9 * 1000 and one.output_tokens.median > 0
    money = bill.money(one)
    assert abs(money.median - (one.input_tokens.median * 2.5 + one.output_tokens.median * 10) / 1e6) < 1e-9


def test_a_thinking_runs_thoughts_are_billed_as_output_tokens_as_the_run_counts_them(tmp_path):
    """--thinking on: each of sw-1's 9 calls a query thinks, its thought billed at the simulated reranker's cost
    (1000 tokens) or at --thinking-budget where smaller: the output tokens are the bill without thinking plus 9 x the
    thought, by hand (they were left out: the bill was a fifth of the spend). Gated: each rehearsal thinks by the
    run's own gate, and the run's thought tokens fall in the bill's interval."""
    common = ["baseline", DL19 / "bm25.run", "--method", "sw-1", *SIM, "--sim-tokens", "gpt-4o", "--dry-run",
              "--rehearsals", "3"]
    outs = {}
    for name, extra in (("off", []), ("on", ["--thinking", "on"]), ("budget", ["--thinking", "on",
                                                                              "--thinking-budget", "300"])):
        acurank(*common, *extra, "--stats", tmp_path / f"{name}.jsonl")
        outs[name] = {q: r["output_tokens"]["median"] for q, r in _stats(tmp_path / f"{name}.jsonl")[0].items()}
    assert all(outs["on"][q] == outs["off"][q] + 9 * 1000 for q in outs["off"])
    assert all(outs["budget"][q] == outs["off"][q] + 9 * 300 for q in outs["off"])
    bill = tmp_path / "gated.jsonl"
    gated = ["rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "--sim-tokens", "gpt-4o", "--thinking", "gated"]
    ran = acurank(*gated, "--dry-run", "--stats", bill)
    assert "thinking gated, each thought billed at 1000 output tokens (the simulated reranker's cost)" in ran.stderr
    stats = tmp_path / "real.jsonl"
    acurank(*gated, "--no-cache", "-o", tmp_path / "real.run", "--stats", stats)
    total = _stats(bill)[1]["output_tokens"]
    spent = sum(r["output_tokens"] + r["reasoning_tokens"] for r in map(json.loads, stats.read_text().splitlines()))
    assert total["low"] <= spent <= total["high"], (total, spent)


def test_a_reasoning_models_thought_is_billed_at_its_budget_on_every_call(tmp_path):
    """openai: with --reasoning-effort the served model reasons on every call; with --thinking-budget its thought is
    bounded, and billed at that bound on each of sw-1's 9 calls (by hand: the bill without it plus 9 x 1024)."""
    args = ["baseline", DL19 / "bm25.run", "--qids", "264014", "--topics", DL19 / "topics.tsv", "--corpus",
            DL19 / "passages.jsonl.gz", "--method", "sw-1", "--reranker", "openai:gpt-5-mini", "--base-url",
            "http://127.0.0.1:9/v1", "--no-cache", "--dry-run", "--rehearsals", "2"]
    outs = []
    for extra in ([], ["--reasoning-effort", "high", "--thinking-budget", "1024"]):
        acurank(*args, *extra, "--stats", tmp_path / f"b{len(outs)}.jsonl")
        outs.append(_stats(tmp_path / f"b{len(outs)}.jsonl")[0]["264014"]["output_tokens"]["median"])
    assert outs[1] == outs[0] + 9 * 1024


def test_a_thought_with_no_budget_is_said_to_bound_nothing_and_refused_under_a_cap(tmp_path):
    """openai: a served model that thinks with no --thinking-budget ends its thought where it will: the bill says its
    thought tokens bound nothing (--reasoning-effort: it counts none; --thinking on: each at hf:'s default budget,
    which openai: does not enforce), in one warning; under --max-cost the dry run refuses it as the run does."""
    args = ["baseline", DL19 / "bm25.run", "--qids", "264014", "--topics", DL19 / "topics.tsv", "--corpus",
            DL19 / "passages.jsonl.gz", "--method", "sw-1", "--reranker", "openai:gpt-5-mini", "--base-url",
            "http://127.0.0.1:9/v1", "--no-cache", "--dry-run", "--rehearsals", "2", "--price-in", "1", "--price-out", "1"]
    for extra, said in ((["--reasoning-effort", "low"], "(--reasoning-effort)"), (["--thinking", "on"], "(--thinking on)")):
        ran = acurank(*args, *extra)
        warned = [l for l in ran.stderr.splitlines() if "warning" in l]
        assert len(warned) == 1 and f"thinks {said} with no bound on a thought, so the bill's thought tokens bound " \
            "nothing" in warned[0], ran.stderr
        if extra == ["--thinking", "on"]:  # its footer called hf:'s default budget "the most it may take: a bound"
            assert "billed at 1024 output tokens (a local model's default budget, which a served model does not " \
                "keep: an estimate, no bound)" in " ".join(ran.stderr.split()), ran.stderr
        refused = acurank(*args, *extra, "--max-cost", "5", check=False)
        assert refused.returncode == 2 and "give --thinking-budget N" in refused.stderr.splitlines()[-1], refused.stderr
    bounded = acurank(*args, "--reasoning-effort", "low", "--thinking-budget", "100")
    assert "warning" not in bounded.stderr, bounded.stderr
    import warnings

    from acurank_cli.api import Reranker  # the API's bill warns as the dry run does (it said nothing)

    with Reranker("openai:gpt-5-mini", "sw-1", base_url="http://127.0.0.1:9/v1", cache=None, thinking="on") as rr, \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rr.estimate([("q", ["a", "b", "c"])], rehearsals=2)
    assert [str(w.message) for w in caught if "bound nothing" in str(w.message)] == [
        "openai:gpt-5-mini thinks (--thinking on) with no bound on a thought, so the bill's thought tokens bound nothing "
        "(give --thinking-budget N: each thought at most N tokens, billed so)"]


def test_the_apis_bill_of_the_simulated_reranker_is_the_dry_runs(tmp_path):
    """Reranker.estimate of a simulated Reranker rehearses as its run goes, as rerank --dry-run does (its qrels, its
    noise, the seeds after its own): the same bill, query by query (it rehearsed with grades from the first-stage
    scores at noise 1, and under-billed a trial's 390 calls at 285)."""
    from acurank_cli.api import Reranker

    qids = ["264014", "104861", "130510"]
    run = [line.split() for line in (DL19 / "bm25.run").read_text().splitlines()]
    queries = [("q", [{"id": d, "text": "t", "score": float(s)} for qq, _, d, _, s, _ in run if qq == q]) for q in qids]
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\tq\n" for q in qids))  # the texts the API's calls carry
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": "t"}) + "\n" for _, docs in queries
                                                   for d in {x["id"] for x in docs}))
    with Reranker("simulated", "acurank", cache=None, qrels=str(DL19 / "qrels.txt"), init="score") as rr:
        bill = rr.estimate(queries, qids=qids, rehearsals=5)
    acurank("rerank", DL19 / "bm25.run", "--reranker", "simulated", "--qrels", DL19 / "qrels.txt", "--qids",
            ",".join(qids), "--dry-run", "--rehearsals", "5", "--stats", tmp_path / "bill.jsonl", "--no-cache")
    dry = [json.loads(line) for line in (tmp_path / "bill.jsonl").read_text().splitlines()]
    assert [(q.qid, q.calls.low, q.calls.median, q.calls.high) for q in bill.queries] == [
        (r["qid"], r["calls"]["low"], r["calls"]["median"], r["calls"]["high"]) for r in dry if "qid" in r]
    # with --sim-tokens its tokens and money too (the API's bill had none: it looked for the built backend's count)
    with Reranker("simulated", "sw-1", cache=None, qrels=str(DL19 / "qrels.txt"), sim_tokens="gpt-4o") as rr:
        priced = rr.estimate(queries[:1], qids=qids[:1], rehearsals=2, price_in=1, price_out=1)
    acurank("baseline", DL19 / "bm25.run", "--method", "sw-1", "--reranker", "simulated", "--qrels",
            DL19 / "qrels.txt", "--sim-tokens", "gpt-4o", "--qids", qids[0], "--dry-run", "--rehearsals", "2",
            "--price-in", "1", "--price-out", "1", "--stats", tmp_path / "priced.jsonl", "--no-cache",
            "--topics", tmp_path / "topics.tsv", "--corpus", tmp_path / "corpus.jsonl")
    dry = json.loads((tmp_path / "priced.jsonl").read_text().splitlines()[0])
    one = priced.queries[0]
    assert (one.input_tokens.median, one.output_tokens.median) == (dry["input_tokens"]["median"],
                                                                  dry["output_tokens"]["median"])
