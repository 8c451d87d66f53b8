"""acurank as MCP tools, through the official MCP client: over stdio (``acurank mcp`` in a subprocess) and over
streamable HTTP (``acurank serve``'s ``/mcp`` on 127.0.0.1). The tools are listed with their schemas; ``rerank``
answers what ``POST /v2/rerank`` answers for the same request; ``evaluate`` what eval computes; a wrong key is
refused; malformed arguments are tool errors, after which the server still answers; HTTP keeps serving while MCP
calls run."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time

import pytest
from conftest import ENV, ROOT

pytest.importorskip("mcp.server.mcpserver")
httpx = pytest.importorskip("httpx")
from test_serve import KEY, Server, dl19_queries  # noqa: E402 - the serve tests' server and sample

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

DL19 = ROOT / "sample_runs" / "dl19"


#: arguments POST /v2/rerank refuses (tests/serve/test_serve.py's BAD): a misspelt field, numbers sent as a string, a
#: boolean or a float, a boolean as a string
TYPED = ({"topn": 1}, {"top_n": "1"}, {"top_n": True}, {"top_n": 1.0}, {"return_documents": "yes"}, {"budget": "3"})


def text_of(result) -> dict:
    """A tool result's JSON (its structured content, else its first text block)."""
    if getattr(result, "structured_content", None):
        return result.structured_content
    return json.loads(result.content[0].text)


async def exercise(session: ClientSession) -> dict:
    """What every transport must answer alike: the tools, a rerank, an evaluate, malformed calls."""
    await session.initialize()
    tools = {t.name: t for t in (await session.list_tools()).tools}
    query, texts = dl19_queries(1, depth=20)[0]
    ranked = text_of(await session.call_tool("rerank", {"query": query, "documents": texts, "top_n": 5}))
    run_lines = (DL19 / "bm25.run").read_text().splitlines()[:300]
    measured = text_of(await session.call_tool("evaluate", {
        "run": "\n".join(run_lines) + "\n", "qrels": (DL19 / "qrels.txt").read_text(), "measures": ["nDCG@10", "map"],
        "rel_level": 2}))
    bad = [await session.call_tool("rerank", {"query": query, "documents": []}),
           await session.call_tool("rerank", {"query": query, "documents": texts, "top_n": 0}),
           await session.call_tool("rerank", {"query": query, "documents": texts, "method": "no-such-method"}),
           await session.call_tool("evaluate", {"run": "/etc/passwd", "qrels": "x"}),
           await session.call_tool("rerank", {"documents": texts})]
    # what POST /v2/rerank refuses, MCP refuses alike (the SDK coerced these and dropped the misspelt field)
    as_http = [await session.call_tool("rerank", {"query": query, "documents": texts, **extra}) for extra in TYPED]
    as_http += [await session.call_tool("evaluate", {"run": "1 Q0 d 1 1 t\n", "qrels": "1 0 d 1\n", **extra})
                for extra in ({"rel_level": "2"}, {"rel_level": True}, {"rellevel": 2}, {"per_query": "yes"},
                              {"rel_level": 0}, {"measures": []}, {"qrels": "2 0 d 1\n"}, {"run": ""})]
    # eval's rules: a run of one query against two judged: the mean counts the other as 0 and the note says so
    # (fill: false, over the run's); a one-line run and qrels are their text (they were read as paths)
    partial = {"run": "1 Q0 d 1 1 t", "qrels": "1 0 d 1\n2 0 e 1\n", "measures": ["P@1"]}
    covered = [text_of(await session.call_tool("evaluate", {**partial, **extra})) for extra in ({}, {"fill": False})]
    again = text_of(await session.call_tool("rerank", {"query": query, "documents": texts, "top_n": 5}))
    long = {"query": query, "documents": [texts[0], " ".join(texts)], "max_chunks_per_doc": 3, "return_documents": True}
    chunked = text_of(await session.call_tool("rerank", long))
    return {"tools": tools, "query": query, "texts": texts, "ranked": ranked, "measured": measured, "bad": bad,
            "as_http": as_http, "covered": covered,
            "again": again, "run_lines": run_lines, "long": long, "chunked": chunked}


def check(seen: dict) -> None:
    tools = seen["tools"]
    assert set(tools) == {"rerank", "evaluate"}
    rerank, evaluate = tools["rerank"], tools["evaluate"]
    assert set(rerank.input_schema["required"]) == {"query", "documents"}
    assert {"top_n", "method", "budget", "return_documents", "max_chunks_per_doc", "pivot"} <= set(rerank.input_schema["properties"])
    assert set(evaluate.input_schema["required"]) == {"run", "qrels"} and "measures" in evaluate.input_schema["properties"]
    assert "best first" in rerank.description and "trec_eval" in evaluate.description
    assert len(seen["ranked"]["results"]) == 5 and seen["again"]["results"] == seen["ranked"]["results"]
    from acurank_cli.evaluation import evaluate as measure
    from acurank_cli.io.collection_files import read_qrels
    from acurank_cli.io.runs import read_run
    import io
    expected = measure(read_run(io.StringIO("\n".join(seen["run_lines"]) + "\n")).scores(), read_qrels(DL19 / "qrels.txt"),
                       ["nDCG@10", "map"], 2)
    assert seen["measured"]["measures"] == {m: pytest.approx(expected.mean(m)) for m in expected.measures}
    messages = []
    for result in seen["bad"]:
        assert result.is_error, result
        messages.append(result.content[0].text)
    assert "documents" in messages[0] and "top_n" in messages[1] and "no-such-method" in messages[2]
    # a path to a server that reads no folder: says so and what to do (not "(none (give the file's text instead))")
    assert "this server reads no folder (it was started without --read-dir): give the file's text instead" in \
        messages[3] and "none (" not in messages[3] and "query" in messages[4]
    assert all("Traceback" not in m for m in messages)
    from acurank_cli.serve.limits import Limits
    from acurank_cli.serve.protocol import BadRequest, parse
    said = []
    for result in seen["as_http"]:
        assert result.is_error, result
        said.append(result.content[0].text)
    for extra, message in zip(TYPED, said):  # the HTTP API's own one line, word for word
        with pytest.raises(BadRequest) as http:
            parse(json.dumps({"query": "q", "documents": ["a"], **extra}).encode(), "v2", Limits())
        assert message == f"Error executing tool rerank: {http.value.message}", (extra, message)  # the SDK's prefix
    assert said[len(TYPED):] == [f"Error executing tool evaluate: {m}" for m in (
        "rel_level: Input should be a valid integer", "rel_level: Input should be a valid integer",
        "rellevel is not a field of this endpoint", "per_query: Input should be a valid boolean",
        "rel_level: must be an integer >= 1", "measures: give at least one measure (left out: nDCG@10)",
        "run: shares no query with the qrels given (run: 1 queries, e.g. 1; qrels: 1, e.g. 2): qrels of another "
        "dataset?", "run: run file is empty")]  # named by its argument, as eval names the file (it said "<stream>")
    filled, over_run = seen["covered"]
    assert filled["measures"] == {"P@1": 0.5} and filled["queries"] == 2
    assert filled["note"] == ("1 of the 2 qrels queries are in the run; the mean counts the others as 0 (fill: false: "
                              "over the run's judged queries only)")
    assert over_run["measures"] == {"P@1": 1.0} and over_run["queries"] == 1
    assert over_run["note"] == "1 of the 2 qrels queries are in the run; the mean is over those (fill: false)"
    # a long document by its passages: its scoring passage returned, cut from it
    chunked = {r["index"]: r for r in seen["chunked"]["results"]}
    assert seen["chunked"]["meta"]["acurank"]["passages"] == {"ranked": 4, "split": 1, "capped": 1}
    assert chunked[1]["passage"]["text"] in seen["long"]["documents"][1] and "passage" not in chunked[0]


def test_stdio_with_the_official_client():
    # --passages 200: DL19's passages (at most 193 words) stay whole; a request's max_chunks_per_doc splits by 200 words
    params = StdioServerParameters(command=sys.executable, args=["-m", "acurank_cli", "mcp", "--reranker", "minilm",
                                                                 "--no-cache", "--passages", "200"], env=ENV, cwd=str(ROOT))

    async def go():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                seen = await exercise(session)
                pivoted = await session.call_tool("rerank", {"query": "q", "documents": ["a flea", "a cat"],
                                                             "pivot": "a passage near the boundary"})
                return seen, pivoted

    seen, pivoted = asyncio.run(go())
    check(seen)
    # a request's pivot on a server that splits documents: refused naming the server's own --passages
    assert (pivoted.is_error, pivoted.content[0].text) == (True, "Error executing tool rerank: pivot with this "
                                                          "server's --passages: a pivot joins windows of documents ranked whole")
    from acurank_cli.api import Reranker
    with Reranker("minilm", method="acurank", cache=None) as rr:
        expected = rr.rerank(seen["query"], seen["texts"], top_k=5)
    assert [r["index"] for r in seen["ranked"]["results"]] == [int(d.id) for d in expected.docs]
    assert [r["relevance_score"] for r in seen["ranked"]["results"]] == pytest.approx([d.p_topk for d in expected.docs])
    (words,) = [r["passage"]["words"] for r in seen["chunked"]["results"] if "passage" in r]
    assert words[1] - words[0] == 200  # the server's passage size (serve's default, 150, in the HTTP test)


def test_streamable_http_on_serve_answers_as_the_http_api_and_keeps_serving_it():
    from mcp.client.streamable_http import streamable_http_client
    import httpx2

    server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY)
    try:
        url = server.url + "/mcp"

        async def go(key: str):
            client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
            async with client, streamable_http_client(url, http_client=client) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    return await exercise(session)

        http_answers: list[int] = []

        def poll():  # plain HTTP while the MCP calls run
            query, texts = dl19_queries(2, depth=10)[1]
            for _ in range(3):
                http_answers.append(httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"},
                                               json={"query": query, "documents": texts}, timeout=120).status_code)

        side = threading.Thread(target=poll)
        side.start()
        seen = asyncio.run(go(KEY))
        side.join(300)
        check(seen)
        assert http_answers == [200, 200, 200]
        direct = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"},
                            json={"query": seen["query"], "documents": seen["texts"], "top_n": 5}, timeout=120).json()
        assert seen["ranked"]["results"] == direct["results"]
        assert seen["ranked"]["meta"]["acurank"]["calls"] == direct["meta"]["acurank"]["calls"]
        direct = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, json=seen["long"],
                            timeout=120).json()
        assert seen["chunked"]["results"] == direct["results"]
        (words,) = [r["passage"]["words"] for r in direct["results"] if "passage" in r]
        assert words[1] - words[0] == 150
        refused = httpx.post(url, headers={"Authorization": "Bearer wrong-key-000"},
                             json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
        assert refused.status_code == 401 and "bearer key" in refused.json()["message"]
        metrics = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).text
        assert 'acurank_requests_total{endpoint="mcp:rerank",status="200"} 3.0' in metrics
    finally:
        code = server.stop()
    assert code == 0, server.stderr
    assert "Traceback" not in server.stderr, server.stderr


def test_an_mcp_call_in_flight_at_sigterm_is_answered_and_the_stop_line_counts_it():
    server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY)
    query, texts = dl19_queries(1, depth=100)[0]
    headers = {"Authorization": f"Bearer {KEY}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "rerank", "arguments": {"query": query, "documents": texts * 2, "top_n": 3}}}
    answered: dict = {}

    def call():
        answered["reply"] = httpx.post(server.url + "/mcp", headers=headers, json=body, timeout=120)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(1.0)  # the call is being reranked (200 passages on a CPU)
    code = server.stop()
    caller.join(120)
    reply = answered["reply"]
    assert reply.status_code == 200
    results = json.loads(reply.json()["result"]["content"][0]["text"])["results"]
    assert len(results) == 3
    assert code == 0 and "Traceback" not in server.stderr, server.stderr
    assert "every request it held (1) was answered" in server.stderr, server.stderr


def rr_topk_calls(path, query, texts, pivot) -> int:
    """The calls of the cut f1 aimed at the top k instead (the API, the same map and request)."""
    from acurank_cli.api import Reranker

    with Reranker("minilm", method="acurank", cache=None, calibration=str(path)) as rr:
        return rr.rerank(query, texts, pivot=pivot, cut="f1", cut_target="topk").calls


def test_a_pivot_per_request_through_http_and_mcp_as_the_api_rates_it(tmp_path):
    """Issue 82: serve and MCP take a request's ``pivot`` (a passage at the relevance boundary, rated in every window),
    so a map fit with a pivot is served: each request's P(relevant) equals the API's for the same query, documents and
    pivot, through ``POST /v2/rerank`` and the MCP ``rerank`` tool alike. A request the pivot's rules refuse is a 400
    naming ``pivot`` (and the same line as a tool error), in the words the CLI and the API use for the same rule."""
    from test_serve import mcp_rerank

    from acurank_cli.api import Reranker
    from acurank_cli.relevance import CalibrationMap

    path = tmp_path / "pivoted.json"  # P = sigmoid(z_pivot - 0.2 log rank): the document's distance above the pivot
    CalibrationMap(2, (0.0,) * 5, (1.0,) * 5, (0.0, 0.0, -0.2, 1.0, 0.0), 0.0,
                   {"k": 10, "backend": "minilm", "method": "acurank"}).save(path)
    query, texts = dl19_queries(1, depth=12)[0]
    pivot = "a passage about the question's words that does not answer it"
    with Reranker("minilm", method="acurank", cache=None, calibration=str(path)) as rr:
        expected = rr.rerank(query, texts, pivot=pivot, top_k=5)
        # the cut (rerank's --cut, --cut-target): by default aimed at the cut's boundary by this map fit with a pivot
        cuts = {(cut, target): rr.rerank(query, texts, pivot=pivot, cut=cut, cut_target=target)
                for cut, target in (("f1", None), ("p:0.5", "topk"))}
    server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY, "--calibration", str(path))
    headers = {"Authorization": f"Bearer {KEY}"}
    try:
        def post(top_n=5, **extra):
            return httpx.post(server.url + "/v2/rerank", headers=headers, timeout=120,
                              json={"query": query, "documents": texts, "top_n": top_n, **extra})


        got = post(pivot=pivot)
        assert got.status_code == 200, got.text
        body = got.json()
        assert [r["index"] for r in body["results"]] == [int(d.id) for d in expected.docs]
        assert [r["relevance_score"] for r in body["results"]] == pytest.approx([d.p_relevant for d in expected.docs])
        assert body["meta"]["acurank"]["relevance_score"] == "p_relevant"
        assert body["meta"]["acurank"]["p_none"] == pytest.approx(expected.p_none)
        refusals = {  # the rule broken -> the one line every entrance says (the request's words)
            "none": ("this server's --calibration map: the map was fit with a pivot in every window, and this request "
                     "has none: give pivot"),
            "simulated": ('pivot "simulated" is the simulated reranker\'s pivot; reranker minilm reads texts: give the '
                          "query's pivot passage"),
            " ": "pivot must not be blank (leave it out for none)",
            "": "pivot must not be blank (leave it out for none)",
        }
        for case, said in refusals.items():
            reply = post() if case == "none" else post(pivot=case)
            assert (reply.status_code, reply.json()) == (400, {"message": said, "field": "pivot"}), reply.text
        answered, *refused = [mcp_rerank(server.url, KEY, {"query": query, "documents": texts, "top_n": 5, **extra})
                              for extra in ({"pivot": pivot}, {}, {"pivot": "simulated"}, {"pivot": " "}, {"pivot": ""})]
        assert text_of(answered)["results"] == body["results"]
        assert [(r.is_error, r.content[0].text) for r in refused] == [  # the SDK's prefix, then the same line
            (True, f"Error executing tool rerank: {said}") for said in refusals.values()]
        for (cut, target), want in cuts.items():  # the API's kept documents, P(relevant) and calls, through both
            extra = {"pivot": pivot, "cut": cut, **({} if target is None else {"cut_target": target})}
            got = post(top_n=len(texts), **extra).json()
            assert [r["index"] for r in got["results"]] == [int(d.id) for d in want.docs], (cut, got)
            assert [r["relevance_score"] for r in got["results"]] == pytest.approx([d.p_relevant for d in want.docs])
            assert (got["meta"]["acurank"]["calls"], got["meta"]["acurank"]["cut"]) == (want.calls, cut)
            assert text_of(mcp_rerank(server.url, KEY, {"query": query, "documents": texts, "top_n": len(texts),
                                                         **extra}))["results"] == got["results"]
        assert cuts["f1", None].calls != rr_topk_calls(path, query, texts, pivot)  # the target matters here
        for extra, said in (({"cut": "top"}, "cut 'top': must be p:X (keep P(relevant) >= X, 0 <= X <= 1) or f1 (the "
                                              "cut that maximises the expected F1)"),
                            ({"cut_target": "cut"}, "cut_target says where a cut's calls go; give cut")):
            reply = post(pivot=pivot, **extra)
            assert (reply.status_code, reply.json()) == (400, {"message": said, "field": next(iter(extra))}), reply.text
    finally:
        code = server.stop()
    assert code == 0 and "Traceback" not in server.stderr, server.stderr
