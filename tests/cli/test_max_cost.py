"""``--max-cost``: a query-set budget in money that is never passed, across a kill and a resume, against a loopback
server whose every answer costs the same (usage: 100 prompt tokens, 7 completion tokens).

By hand: sw-1 over 100 candidates sends 9 windows a query, whatever the answers, so a query's bound is 9 calls x
(4,096 context tokens x 1,000 a million input tokens) = 36.864 (the output price is 0), and a query costs
9 x 100 x 1,000 / 10^6 = 0.9. One query in flight (--batch-queries 1): the k-th query starts while
(k - 1) x 0.9 + 36.864 <= 50, so k <= 15: 15 queries start and 28 of DL19's 43 are left."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ENV, ROOT, acurank, kill_after_lines
from fake_chat_server import FakeServer

DL19 = ROOT / "sample_runs" / "dl19"


def _args(srv, tmp_path, cap="50"):
    return ["baseline", DL19 / "bm25.run", "--method", "sw-1", "--reranker", "openai:gpt-4o-mini", "--base-url",
            srv.base_url, "--batch-queries", "1", "--price-in", "1000", "--price-out", "0", "--max-cost", cap,
            "--cache", tmp_path / "calls.sqlite", "-o", tmp_path / "x.run"]


def _money(tmp_path) -> list[float]:
    """Each query's money as written, which the one stats reader reads back the same (report html shows it)."""
    from acurank_cli.io.run_files import read_stats

    written = [json.loads(l) for l in (tmp_path / "x.stats.jsonl").read_text().splitlines()]
    read = read_stats(tmp_path / "x.stats.jsonl")
    assert [read[r["qid"]].money for r in written] == [r["money"] for r in written]
    return [r["money"] for r in written]


def test_the_cap_stops_starting_queries_where_the_next_bound_would_pass_it(tmp_path):
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        ran = acurank(*_args(srv, tmp_path))
        sent = len(srv.bodies)
        assert _money(tmp_path) == [0.9] * 15 and sent == 15 * 9
        assert "money 13.5000" in ran.stderr and "--max-cost 50: 28 queries left unstarted" in ran.stderr, ran.stderr
        least = "rerun with --max-cost 50.3640 or more to start it"  # by hand: 15 x 0.9 spent + the bound 36.864
        assert least in ran.stderr, ran.stderr
        # the same command again: what is spent (13.5) counts, so the next bound still does not fit
        ran = acurank(*_args(srv, tmp_path))
        assert len(srv.bodies) == sent and "28 queries left unstarted" in ran.stderr and least in ran.stderr
        # a cap under the first bound starts none, and says the least that starts it: the bound alone
        (tmp_path / "none").mkdir()
        ran = acurank(*_args(srv, tmp_path / "none", "0"))
        assert len(srv.bodies) == sent and "--max-cost 0: 43 queries left unstarted" in ran.stderr
        assert "rerun with --max-cost 36.8640 or more to start it" in ran.stderr, ran.stderr
        # under a higher cap the resume goes on: k-th query while 13.5 + (k - 1) x 0.9 + 36.864 <= 80, all 28 fit
        ran = acurank(*_args(srv, tmp_path, "80"))
        assert len(srv.bodies) == 43 * 9 and len(_money(tmp_path)) == 43
    assert "every query started within it" in ran.stderr and sum(_money(tmp_path)) <= 80


def test_the_dry_run_counts_what_a_resumed_run_spent_as_the_run_does(tmp_path):
    """The bill's prediction of a resume under the cap starts from the finished queries' spend, as the run's cap
    does: after 15 queries (13.5 spent), the 16th's bound does not fit under 50 (13.5 + 36.864 > 50), so none of the
    28 left would start, which the rerun then does. (It counted from 0, where the first bound fits: 36.864 <= 50.)"""
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        acurank(*_args(srv, tmp_path))
        sent = len(srv.bodies)
        billed = acurank(*_args(srv, tmp_path), "--dry-run", "--stats", tmp_path / "bill.jsonl")
        assert len(srv.bodies) == sent  # the dry run calls nothing
        ran = acurank(*_args(srv, tmp_path))
    assert ("--max-cost 50 (13.5000 spent already by the 15 finished): about 0 of the 28 queries would start, 28 left "
            "unstarted") in billed.stderr, billed.stderr
    total = json.loads((tmp_path / "bill.jsonl").read_text().splitlines()[-1])["total"]
    assert total["max_cost"] == {"limit": 50.0, "spent": 13.5, "start": 0, "left": 28}
    assert "28 queries left unstarted" in ran.stderr


def test_the_cap_holds_across_a_kill_and_a_resume(tmp_path):
    """SIGKILL mid-run, then the same command: 15 queries in all, and what the server was paid for (each request
    costs 0.1) never passes the cap; the killed query's answered windows come from the call cache. One window is in
    flight at a time (sw-1, --batch-queries 1), so the only request the resume may send again is the one the kill
    caught in flight: the last the server got before it (sent, its answer never read)."""
    with FakeServer(lambda q, a: ("ok", 0.02)) as srv:
        args = [sys.executable, "-m", "acurank_cli", *map(str, _args(srv, tmp_path))]
        proc = subprocess.Popen(args, stderr=subprocess.DEVNULL, env=ENV, cwd=tmp_path)
        kill_after_lines(proc, tmp_path / "x.stats.jsonl", 5)
        before = len(srv.bodies)
        acurank(*_args(srv, tmp_path))
        bodies = [json.dumps(b, sort_keys=True) for b in srv.bodies]
    paid = len(bodies) * 9 * 100 * 1000 / 1e6 / 9  # 0.1 a request
    assert len(_money(tmp_path)) == 15 and len((tmp_path / "x.run").read_text().splitlines()) == 1500
    again = len(bodies) - len(set(bodies))
    assert paid <= 50 and len(set(bodies)) == 15 * 9 and again <= 1  # no answered window paid twice
    assert again == 0 or bodies.count(bodies[before - 1]) == 2  # only the window in flight at the kill


def test_a_cap_without_prices_or_a_bound_is_refused_in_one_line(tmp_path):
    for args, words in ((["--max-cost", "5"], "--max-cost is money: give --price-in and --price-out"),
                        (["--max-cost", "5", "--price-in", "1", "--price-out", "1", "--method", "acurank-auto",
                          "--beta-pool", "query"], "method 'acurank-auto' does not say the most calls it makes"),
                        (["--max-cost", "5", "--price-in", "1", "--price-out", "1"],
                         "reranker simulated counts none")):
        ran = acurank("rerank", DL19 / "bm25.run", "--reranker", "simulated",
                      "--qrels", DL19 / "qrels.txt", "--no-cache", "-o", tmp_path / "y.run", *args, check=False)
        said = [l for l in ran.stderr.strip().splitlines() if not l.startswith("acurank: using ")]  # inputs' notes
        assert ran.returncode == 2 and len(said) == 1 and words in said[0], ran.stderr
        assert not (tmp_path / "y.run").exists()  # before the outputs open, and so before any call


def test_most_calls_is_the_most_a_run_makes(tmp_path):
    """By hand: acurank over 100 candidates sends 5 initial windows of 20 and at most B = 100 adaptive groups (the
    final pass among them): 105; acurank-9 at most its cap, 9; sw-1 its 9 windows (starts 80, 70, ..., 0); tourrank-1
    5 groups of 20, 5 of the top 50, then the top 20, 10 and 5 in one group each: 13 (it was refused under
    --max-cost, though the dry run billed it exactly); ts-5-2-2-1 5 windows of the 100, 2 of the top 40 twice, 1 of
    the top 20: 10. The simulated runs of DL19 never make more (the last two make exactly that)."""
    from acurank_cli.records import Candidate, RankingTask
    from acurank_cli.run.pipeline import ScoreSource, method

    task = RankingTask("q", "q", tuple(Candidate(f"d{i}", 100.0 - i) for i in range(100)))
    names = ("acurank", "acurank-9", "sw-1", "tourrank-1", "ts-5-2-2-1")
    bounds = {name: method(name, {}, ScoreSource.run_file).most_calls(task) for name in names}
    assert bounds == {"acurank": 105, "acurank-9": 9, "sw-1": 9, "tourrank-1": 13, "ts-5-2-2-1": 10}
    for name, bound in bounds.items():
        acurank("rerank" if name.startswith("acurank") else "baseline", DL19 / "bm25.run", "--method", name, "--reranker",
                      "simulated", "--qrels", DL19 / "qrels.txt", "--sim-noise", "2", "--no-cache", "-o", tmp_path / f"{name}.run")
        calls = [json.loads(l)["calls"] for l in (tmp_path / f"{name}.stats.jsonl").read_text().splitlines()]
        assert calls and max(calls) <= bound, (name, max(calls))
        if name in ("tourrank-1", "ts-5-2-2-1"):
            assert set(calls) == {bound}, (name, set(calls))


def test_with_queries_in_flight_the_next_waits_for_them_rather_than_ending_the_run(tmp_path):
    """--batch-queries 8: a query that does not fit beside the ones in flight waits for them (it ended the run: a
    run with eight in flight stopped after its first wave, and said to raise the cap). By hand, as above: at --max-cost
    50 one query's bound (36.864) leaves no room for a second beside it, so the queries go one at a time and the same
    15 start, 28 left; at 80 two fit at once while spent <= 6.27, then one, while spent <= 43.136: all 43 (38.7)."""
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        args = [a if a != "1" else "8" for a in _args(srv, tmp_path)]  # --batch-queries 8
        ran = acurank(*args)
        assert len(_money(tmp_path)) == 15 and "--max-cost 50: 28 queries left unstarted" in ran.stderr, ran.stderr
        (tmp_path / "x.run").unlink()
        (tmp_path / "x.stats.jsonl").unlink()
        ran = acurank(*[a if a != "50" else "80" for a in args])
        assert len(_money(tmp_path)) == 43 and "every query started within it" in ran.stderr, ran.stderr
    assert abs(sum(_money(tmp_path)) - 38.7) < 1e-9


def test_under_the_cap_every_completion_is_capped_at_what_its_bound_reserved(tmp_path):
    """openai: sends no max_tokens by default (as published), so an answer that ran on past the ranking would cost
    more than the bound the cap reserved for its call. Under --max-cost every request carries max_tokens: the out
    tokens of that bound (call_bound's, for sw-1's windows of 20); a call that thinks, --thinking-budget plus them
    (sent as max_completion_tokens to a reasoning model); one that thinks with no budget has no cap, and is refused
    in one line before any call, leaving nothing at --cache (an empty cache was made). By hand, as above: under --max-cost 37 one query starts (0.9 + 36.864 > 37)."""
    from acurank_cli.method.registry import build_strategy
    from acurank_cli.rerankers.backend import build_reranker
    from acurank_cli.run.money import call_bound

    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        free = build_reranker("openai:gpt-4o-mini", base_url=srv.base_url)
        request = free.prompt(_one_window())
        assert "max_tokens" not in free.payload(request)  # no cap: as published
        out = call_bound(build_reranker("openai:gpt-4o-mini", base_url=srv.base_url), build_strategy("sw-1"))[1]
        (tmp_path / "a").mkdir()
        acurank(*_args(srv, tmp_path / "a", "37"))
        assert len(srv.bodies) == 9 and {b["max_tokens"] for b in srv.bodies} == {out}, srv.bodies[0]
        (tmp_path / "b").mkdir()
        ran = acurank(*_args(srv, tmp_path / "b", "37"), "--reasoning-effort", "low", check=False)
        said = [l for l in ran.stderr.strip().splitlines() if "error" in l]  # said after the backend's notes
        assert ran.returncode == 2 and len(said) == 1 and "give --thinking-budget N" in said[0], ran.stderr
        assert "Traceback" not in ran.stderr and len(srv.bodies) == 9 and not (tmp_path / "b" / "x.run").exists()
        assert sorted(p.name for p in (tmp_path / "b").iterdir()) == []  # refused after the backend: no cache made
        acurank(*_args(srv, tmp_path / "b", "37"), "--reasoning-effort", "low", "--thinking-budget", "50")
        thought = srv.bodies[9:]
        assert len(thought) == 9 and {b["max_completion_tokens"] for b in thought} == {50 + out}, thought[0]
    assert 0 < out < 100


def _one_window():
    """DL19's first query's first 20 candidates, as a window the backend builds a prompt of."""
    from acurank_cli.io.runs import read_run
    from acurank_cli.records import Doc, RerankRequest

    run = read_run(str(DL19 / "bm25.run"))
    qid = next(iter(run))
    ids = tuple(c.docid for c in run[qid][:20])
    return RerankRequest(qid, "a query", ids, tuple(Doc(d, f"passage {d}") for d in ids))


def test_a_model_that_thinks_unasked_under_the_cap_is_told_its_thoughts_were_cut(tmp_path):
    """A served model that thinks by default (no --thinking flag), against a server that honours max_tokens (a word a
    token here): under --max-cost each completion ends at the answer's budget, inside the thought. Every window then
    keeps its order (the ranking never comes from the thought: the run is the first stage's), and the run says so
    in one warning after the summary; without the cap the answer after the thought ranks, and nothing is said."""

    def respond(n, body):
        text = "<think>" + "weighing [2] against [1] first. " * 50 + "</think>" + " > ".join(f"[{i}]" for i in range(n, 0, -1))
        words, cap = text.split(" "), body.get("max_tokens")
        cut = cap is not None and len(words) > cap
        content = " ".join(words[:cap]) if cut else text
        return 200, {"id": "x", "object": "chat.completion", "usage": {"prompt_tokens": 100, "completion_tokens": 7},
                     "choices": [{"index": 0, "finish_reason": "length" if cut else "stop",
                                  "message": {"role": "assistant", "content": content}}]}

    from acurank_cli.io.runs import read_run

    first = [c.docid for c in read_run(str(DL19 / "bm25.run"))["264014"]]
    with FakeServer(lambda q, a: ("ok", 0.0), respond=respond) as srv:
        for cap in (None, "37"):
            (tmp_path / str(cap)).mkdir()
            args = _args(srv, tmp_path / str(cap), cap or "37")
            if cap is None:
                args = args[:args.index("--max-cost")] + args[args.index("--max-cost") + 2:]
            ran = acurank(*args, "--qids", "264014")
            order = [l.split()[2] for l in (tmp_path / str(cap) / "x.run").read_text().splitlines()]
            warned = [l for l in ran.stderr.splitlines() if "warning" in l]
            if cap is None:
                assert not warned and order != first, ran.stderr
            else:
                assert order == first and len(warned) == 1, ran.stderr
                assert "9 of the 9 calls were a thought cut there" in warned[0] and "--thinking off" in warned[0]


def _replying(completion_tokens=None, prefix=""):
    """A reply shaper: the window reversed after ``prefix``, cut at max_tokens words (finish_reason "length"), with
    usage 100 in and ``completion_tokens`` out (None: the words sent)."""

    def respond(n, body):
        words = (prefix + " > ".join(f"[{i}]" for i in range(n, 0, -1))).split(" ")
        cap = body.get("max_tokens")
        cut = cap is not None and len(words) > cap
        sent = words[:cap] if cut else words
        return 200, {"id": "x", "object": "chat.completion",
                     "usage": {"prompt_tokens": 100, "completion_tokens": completion_tokens or len(sent)},
                     "choices": [{"index": 0, "finish_reason": "length" if cut else "stop",
                                  "message": {"role": "assistant", "content": " ".join(sent)}}]}

    return respond


def _priced(args, out_price):
    return [out_price if a == "0" and args[i - 1] == "--price-out" else a for i, a in enumerate(args)]


def test_a_query_that_costs_past_its_bound_stops_the_starts_and_is_said(tmp_path):
    """A server that ignores max_tokens and reports 5,000 completion tokens a call: by hand a query's bound is 9 x
    (4,096 x 0.001 + out x 0.001) with out the answer's budget (under 100), at most 37.76, and it costs 9 x (100 +
    5,000) x 0.001 = 45.9. Under --max-cost 100 the first query starts; once it cost past its bound no other starts
    (the old rule started a second: 45.9 + its bound <= 100, and spent 91.8), and the run says why."""
    with FakeServer(lambda q, a: ("ok", 0.0), respond=_replying(completion_tokens=5000)) as srv:
        ran = acurank(*_priced(_args(srv, tmp_path, "100"), "1000"))
    assert _money(tmp_path) == [45.9], _money(tmp_path)
    warned = [l for l in ran.stderr.splitlines() if l.startswith("acurank: warning")]
    assert len(warned) == 1 and "1 queries cost more than their bound" in warned[0], ran.stderr
    assert "42 queries left unstarted (a query cost more than its bound: see the warning)" in ran.stderr


def test_answers_cut_by_the_cap_are_said(tmp_path):
    """A reply longer than the answer's budget (prose before the ranking, no thought tag) is cut at max_tokens and
    read as far as it went (parse status truncated): the run says how many, and how a template that opens a thought
    is made known."""
    with FakeServer(lambda q, a: ("ok", 0.0), respond=_replying(prefix="Here is my ranking: " * 12)) as srv:
        ran = acurank(*_args(srv, tmp_path, "37"), "--qids", "264014")
    warned = [l for l in ran.stderr.splitlines() if l.startswith("acurank: warning")]
    assert len(warned) == 1 and "9 of the 9 answers were cut there and read as far as they went" in warned[0], ran.stderr
