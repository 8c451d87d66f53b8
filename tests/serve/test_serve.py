"""acurank serve: real servers on 127.0.0.1 (the CLI in a subprocess), real clients (the cohere SDK, LangChain's
and LlamaIndex's CohereRerank), real backends (minilm; openai: against a loopback chat server with latency).

The clients' order must equal the Python API's on the same documents; every bad request is a 4xx JSON error
naming its field; a full server answers 429 with Retry-After; a client that leaves frees its windows; SIGTERM
drains the requests in flight and exits 0; no traceback is ever printed."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ENV, ROOT, chat_server

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

KEY = "test-key-0123456789"


def dl19_queries(count: int, depth: int = 30) -> list[tuple[str, list[str]]]:
    """The first ``count`` DL19 queries with their BM25 top ``depth`` passages' texts, in BM25 order."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import dl19_texts  # the benchmarks' reader of the sample

    return [(query, texts) for _, query, _, texts in dl19_texts(count, depth)]


def mcp_rerank(url: str, key: str | None, arguments: dict):
    """One call of the MCP ``rerank`` tool at a running server's ``/mcp`` (the official client)."""
    pytest.importorskip("mcp.server.mcpserver")
    import asyncio

    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def call():
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=120)
        async with client, streamable_http_client(url + "/mcp", http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                return await session.call_tool("rerank", arguments)

    return asyncio.run(call())


class Server:
    """``acurank serve`` in a subprocess on 127.0.0.1 and a free port; its stderr kept."""

    def __init__(self, *flags: str, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", "serve", "--port", "0", *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or ENV)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 180
        self.url = None
        while time.monotonic() < deadline and self.url is None:
            for line in list(self.lines):
                found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
                if found:
                    self.url = found.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if self.url is None:
            self.stop()
            raise AssertionError(f"the server did not start: {''.join(self.lines)[-2000:]}")

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.reader.join(10)
        return code


@pytest.fixture(scope="module")
def minilm():
    server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY)
    try:
        yield server
    finally:
        code = server.stop()
        assert code == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr


@pytest.fixture(scope="module")
def local():
    from acurank_cli.api import Reranker

    with Reranker("minilm", method="acurank", cache=None) as rr:
        yield rr


def test_the_cohere_sdk_v2_and_v1_get_the_python_apis_order(minilm, local):
    cohere = pytest.importorskip("cohere")

    v2 = cohere.ClientV2(api_key=KEY, base_url=minilm.url)
    v1 = cohere.Client(api_key=KEY, base_url=minilm.url)
    for query, texts in dl19_queries(3):
        expected = local.rerank(query, texts, top_k=5)
        got = v2.rerank(model="acurank", query=query, documents=texts, top_n=5)
        assert [r.index for r in got.results] == [int(d.id) for d in expected.docs]
        assert [r.relevance_score for r in got.results] == pytest.approx([d.p_topk for d in expected.docs])
        assert got.meta.billed_units.search_units == 1
        extra = got.meta.model_extra or {}
        assert extra["acurank"]["calls"] == expected.calls and extra["acurank"]["method"] == "acurank"
        old = v1.rerank(model="acurank", query=query, documents=texts, top_n=5, return_documents=True)
        assert [r.index for r in old.results] == [int(d.id) for d in expected.docs]
        assert [r.document.text for r in old.results] == [texts[int(d.id)] for d in expected.docs]


def test_langchain_and_llamaindex_cohere_rerankers_get_the_python_apis_order(minilm, local):
    pytest.importorskip("langchain_cohere")
    pytest.importorskip("llama_index.postprocessor.cohere_rerank")
    from langchain_cohere import CohereRerank as LangChainRerank
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.cohere_rerank import CohereRerank as LlamaRerank

    chain = LangChainRerank(cohere_api_key=KEY, base_url=minilm.url, model="acurank", top_n=3)
    llama = LlamaRerank(api_key=KEY, base_url=minilm.url, model="acurank", top_n=4)
    for query, texts in dl19_queries(2, depth=25):
        kept = chain.compress_documents([Document(page_content=t) for t in texts], query)
        expected = local.rerank(query, texts, top_k=3)
        assert [d.page_content for d in kept] == [d.text for d in expected.docs]
        assert [d.metadata["relevance_score"] for d in kept] == pytest.approx([d.p_topk for d in expected.docs])
        nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}")) for i, t in enumerate(texts)]
        out = llama.postprocess_nodes(nodes, QueryBundle(query))
        expected = local.rerank(query, texts, top_k=4)
        assert [n.node.id_ for n in out] == [f"n{d.id}" for d in expected.docs]


def test_a_request_can_name_another_method_and_its_budget(minilm, local):
    from acurank_cli.api import Reranker

    query, texts = dl19_queries(1)[0]
    reply = httpx.post(f"{minilm.url}/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, timeout=120,
                       json={"query": query, "documents": texts, "method": "sw-1"}).json()
    with Reranker("minilm", method="sw-1", cache=None) as rr:
        expected = rr.rerank(query, texts)
    assert [r["index"] for r in reply["results"]] == [int(d.id) for d in expected.docs]
    assert reply["meta"]["acurank"]["method"] == "sw-1" and reply["meta"]["acurank"]["relevance_score"] == "position"
    reply = httpx.post(f"{minilm.url}/v1/rerank", headers={"Authorization": f"Bearer {KEY}"}, timeout=120,
                       json={"query": query, "documents": texts, "budget": 2}).json()
    # the budget caps AcuRank's adaptive groups: the first pass over 30 documents (2 windows of 20) plus 2
    assert reply["meta"]["acurank"]["calls"] == 2 + 2 and reply["meta"]["acurank"]["stop"] == "budget"
    assert reply["usage"]["total_tokens"] == reply["meta"]["tokens"]["input_tokens"]  # Jina's field, on v1


BAD = [  # (body, the field the error must name)
    (b"", "body"),
    (b"{not json", "body"),
    (b"[1, 2]", "body"),
    (b'"a string"', "body"),
    (b"null", "body"),
    (b'{"documents": ["a"]}', "query"),
    (b'{"query": "q"}', "documents"),
    (b'{"query": 3, "documents": ["a"]}', "query"),
    (b'{"query": "   ", "documents": ["a"]}', "query"),
    (b'{"query": "q", "documents": []}', "documents"),
    (b'{"query": "q", "documents": "a"}', "documents"),
    (b'{"query": "q", "documents": [1]}', "documents[0]"),
    (b'{"query": "q", "documents": ["a", null]}', "documents[1]"),
    (b'{"query": "q", "documents": ["a", {"title": "t"}]}', "documents[1].text"),
    (b'{"query": "q", "documents": [{"text": 5}]}', "documents[0].text"),
    (b'{"query": "q", "documents": ["a", "  "]}', "documents[1]"),
    (b'{"query": "q", "documents": ["a"], "top_n": 0}', "top_n"),
    (b'{"query": "q", "documents": ["a"], "top_n": "3"}', "top_n"),
    (b'{"query": "q", "documents": ["a"], "top_n": 2.5}', "top_n"),
    (b'{"query": "q", "documents": ["a"], "top_n": true}', "top_n"),
    (b'{"query": "q", "documents": ["a"], "return_documents": "yes"}', "return_documents"),
    (b'{"query": "q", "documents": ["a"], "max_tokens_per_doc": -1}', "max_tokens_per_doc"),
    (b'{"query": "q", "documents": ["a"], "topn": 3}', "topn"),
    (b'{"query": "q", "documents": ["a", "b"], "method": "acurank-x"}', "method"),
    (b'{"query": "q", "documents": ["a", "b"], "method": 7}', "method"),
    (b'{"query": "q", "documents": ["a", "b"], "budget": -1}', "budget"),
    (b'{"query": "q", "documents": ["a", "b"], "method": "sw-1", "budget": 3}', "budget"),
    (b'{"query": "q", "documents": [{"a": 1}], "rank_fields": ["b"]}', "documents[0].b"),
    (b'{"query": "q", "documents": ["a"], "rank_fields": "a"}', "rank_fields"),
    (b'{"query": "q", "documents": ["' + b"w " * 10 + b'"], "extra": {"x": 1}}', "extra"),
    # a cut needs this server's map (rerank's --cut needs --calibration): this server has none
    (b'{"query": "q", "documents": ["a", "b"], "cut": "f1"}', "cut"),
    (b'{"query": "q", "documents": ["a", "b"], "cut": 0.5}', "cut"),
    (b'{"query": "q", "documents": ["a", "b"], "cut_target": "cut"}', "cut_target"),
]


def test_a_request_the_sessions_rules_refuse_is_one_line_naming_its_field(minilm):
    """The rules a request meets in the session (Session.admit, the same for the API and every server request): a
    method whose queries advance together cannot be served one request at a time; a method's check of the task (an
    acurank-N whose N does not cover the first pass over the documents), said of the request, not of its internal
    query id. Through HTTP and MCP alike."""
    many = [f"passage {i} about fleas" for i in range(21)]
    for extra, field, said in (
            ({"method": "acurank-auto"}, "method",
             "method 'acurank-auto' advances every query of a run together (a query-set budget or a pool shared by "
             "the run's queries) and cannot be served a request at a time (acurank-auto: give --beta-pool query)"),
            ({"method": "acurank-1", "documents": many}, "documents",
             "documents: acurank-1: the request has 21 candidates, whose initial pass alone takes 2 calls of m = 20; "
             "use acurank-N with N >= 2, or fewer candidates (the command line's --depth)")):
        body = {"query": "how long do fleas live", "documents": ["a flea", "a cat"], **extra}
        reply = httpx.post(minilm.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, json=body, timeout=60)
        assert (reply.status_code, reply.json()) == (400, {"message": said, "field": field}), reply.text
        result = mcp_rerank(minilm.url, KEY, body)
        assert (result.is_error, result.content[0].text) == (True, f"Error executing tool rerank: {said}")


@pytest.mark.parametrize("field, value, said", [
    ("top_n", 0, "top_n: must be an integer >= 1"),
    ("budget", -1, "budget: must be an integer >= 0"),
    ("max_chunks_per_doc", 0, "max_chunks_per_doc: must be an integer >= 1"),
    ("max_tokens_per_doc", -3, "max_tokens_per_doc: must be an integer >= 1"),
])
def test_a_number_outside_its_bounds_is_refused_in_the_domains_words(field, value, said):
    """A request's number outside its bounds reads as every other entrance's parameter error (params.Domain: the
    command line's ``--k 0: must be an integer >= 1``), not in pydantic's words ("Input should be greater than or
    equal to 1"); the same parse serves /v1, /v2 and MCP's rerank."""
    import json

    from acurank_cli.serve.limits import Limits
    from acurank_cli.serve.protocol import BadRequest, parse

    body = json.dumps({"query": "q", "documents": ["a", "b"], field: value}).encode()
    with pytest.raises(BadRequest) as refused:
        parse(body, "v2", Limits())
    assert (str(refused.value), refused.value.field) == (said, field)


def test_a_field_given_twice_is_refused_and_a_byte_order_mark_is_ignored():
    """A field given twice in one object was taken as its last value, in silence (the third trial: two queries, the
    second ranked); it is refused naming the field, at the top and within a document. A UTF-8 byte order mark before
    the body (PowerShell's) was "not valid JSON (expected value at line 1 column 1)"; JSON lets a reader ignore it."""
    from acurank_cli.serve.limits import Limits
    from acurank_cli.serve.protocol import BadRequest, parse

    for body, field in ((b'{"query": "flea", "query": "cat", "documents": ["a"]}', "query"),
                        (b'{"query": "q", "documents": ["z", {"text": "a", "text": "b"}]}', "documents[1].text"),
                        (b'{"query": "q", "documents": [{"text": "a", "m": {"k": 1, "k": 2}}]}', "documents[0].m.k")):
        with pytest.raises(BadRequest) as refused:
            parse(body, "v2", Limits())
        assert (str(refused.value), refused.value.field) == (
            f"{field} is given twice in one object: give each field once", field)
    call = parse(b'\xef\xbb\xbf{"query": "q", "documents": ["a", "b"]}', "v2", Limits())
    assert call.query == "q" and call.texts == ("a", "b")


def test_a_body_that_escapes_a_lone_surrogate_is_said_so():
    """A lone surrogate escaped in a body's string was "not valid JSON (unexpected end of hex escape ...)", of an
    escape that is whole (stop 103's trial); it is now said in the words of every JSON reader. An emoji's escaped
    pair is text like any other, and a body cut short is still said as the parser says it."""
    from acurank_cli.serve.limits import Limits
    from acurank_cli.serve.protocol import BadRequest, parse

    with pytest.raises(BadRequest) as refused:
        parse(b'{"query": "q", "documents": [{"text": "a", "title": "\\ud800"}, "b"]}', "v2", Limits())
    assert (str(refused.value), refused.value.field) == (
        "the body is not valid JSON (not valid Unicode text: a lone surrogate, '\\ud800', escaped in a string)", "body")
    assert parse(b'{"query": "q", "documents": ["a \\ud83d\\ude42", "b"]}', "v2", Limits()).texts[0] == "a \U0001f642"
    with pytest.raises(BadRequest, match=r"^the body is not valid JSON \(EOF while parsing"):
        parse(b'{"query": "q", ', "v2", Limits())
    for blank in ('""', '"\\u200b"', '"\\u0000 "'):  # nothing to read: blank by records.visible, as a document's text
        # (an empty one was the schema's "String should have at least 1 character", where the API says this)
        with pytest.raises(BadRequest) as refused:
            parse(b'{"query": "q", "documents": ["a"], "pivot": ' + blank.encode() + b'}', "v2", Limits())
        assert (str(refused.value), refused.value.field) == ("pivot must not be blank (leave it out for none)", "pivot")


def test_every_bad_request_is_a_4xx_naming_its_field(minilm):
    assert len(BAD) >= 25
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    with httpx.Client(timeout=60) as client:
        for endpoint in ("/v1/rerank", "/v2/rerank"):
            for body, field in BAD:
                reply = client.post(minilm.url + endpoint, content=body, headers=headers)
                assert 400 <= reply.status_code < 500, (body, reply.status_code, reply.text)
                error = reply.json()
                assert error["field"] == field, (body, error)
                assert error["message"] and "\n" not in error["message"], (body, error)
        # too many documents and too many bytes: 413, named
        reply = client.post(minilm.url + "/v2/rerank", headers=headers,
                            json={"query": "q", "documents": ["a"] * 1001})
        assert reply.status_code == 413 and reply.json()["field"] == "documents"
        reply = client.post(minilm.url + "/v2/rerank", headers=headers,
                            json={"query": "q", "documents": ["a" * (9 * 1024 * 1024)]})
        assert reply.status_code == 413 and reply.json()["field"] == "body"
        # the same body to /mcp: the same JSON 413 (it was the MCP SDK's plain text)
        reply = client.post(minilm.url + "/mcp", headers={**headers, "Accept": "application/json, text/event-stream"},
                            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "rerank", "arguments": {"query": "q",
                                                                             "documents": ["a" * (9 * 1024 * 1024)]}}})
        assert reply.status_code == 413 and reply.json()["field"] == "body", reply.text[:200]
        assert "more than this server's limit" in reply.json()["message"]
        # no key, a wrong key: 401 naming the header; /health needs none
        assert client.post(minilm.url + "/v2/rerank", json={"query": "q", "documents": ["a"]}).status_code == 401
        reply = client.post(minilm.url + "/v2/rerank", headers={"Authorization": "Bearer wrong-key-xyz"},
                            json={"query": "q", "documents": ["a"]})
        assert reply.status_code == 401 and reply.json()["field"] == "Authorization"
        assert client.get(minilm.url + "/metrics").status_code == 401
        assert client.get(minilm.url + "/health").json()["status"] == "ok"
        # an unknown path and a wrong verb: JSON too
        assert client.get(minilm.url + "/v3/rerank").json()["field"] == "path"
        assert client.get(minilm.url + "/v2/rerank", headers=headers).status_code == 405
        models = client.get(minilm.url + "/v1/models", headers=headers).json()
        assert models["data"][0]["id"] == "minilm"
        metrics = client.get(minilm.url + "/metrics", headers=headers).text
        assert 'acurank_requests_total{endpoint="/v2/rerank",status="400"}' in metrics
    assert "Traceback" not in minilm.stderr


def _start_when_busy(threads: list[threading.Thread], state: dict, requests: int) -> None:
    """Start the client threads and wait (30 s at most) until the LLM server has taken ``requests`` requests."""
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while state["requests"] < requests and time.monotonic() < deadline:
        time.sleep(0.05)


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, flags=re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_full_server_says_429_and_a_client_that_leaves_frees_its_windows():
    httpd, state, lock = chat_server(0.4)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    server = Server("--reranker", "openai:fake", "--base-url", url, "--concurrency", "2", "--no-cache",
                    "--method", "sw-1", "--max-in-flight", "1", "--max-queued", "1")
    query, texts = dl19_queries(1, depth=100)[0]  # sw-1 on 100 documents: 9 windows, one after another (~3.6 s)
    body = {"query": query, "documents": texts}
    try:
        replies: list = []

        def ask():
            replies.append(httpx.post(server.url + "/v2/rerank", json=body, timeout=120))

        first = threading.Thread(target=ask)
        first.start()
        deadline = time.monotonic() + 30
        while state["requests"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        second = threading.Thread(target=ask)
        second.start()
        time.sleep(0.5)
        full = httpx.post(server.url + "/v2/rerank", json=body, timeout=30)
        assert full.status_code == 429 and full.headers["retry-after"] == "1", full.text
        out = [httpx.get(server.url + "/health", timeout=10).json()["windows_out"] for _ in range(20)]
        assert max(out) >= 1, out  # the first request's window at the LLM server (0.4 s each, 9 in a row)
        assert "in flight" in full.json()["message"]
        first.join(60)
        second.join(60)
        assert [r.status_code for r in replies] == [200, 200]
        assert replies[0].json()["results"] == replies[1].json()["results"]
        # a client that gives up after its first window: the rest of its windows are never sent
        before = state["requests"]
        with pytest.raises(httpx.TimeoutException):
            httpx.post(server.url + "/v2/rerank", json=body, timeout=0.6)
        time.sleep(2.5)
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert _metric(metrics, "acurank_requests_withdrawn_total") == 1
        assert state["requests"] - before <= 3, state["requests"] - before  # of its 9 windows
        # the windows it had sent were made, and are counted as calls: 9 + 9 answered, and the withdrawn one's
        assert _metric(metrics, "acurank_reranker_calls_total") == _metric(metrics, "acurank_backend_windows_total")
        assert _metric(metrics, "acurank_reranker_calls_total") > 18
        health = httpx.get(server.url + "/health", timeout=10).json()
        assert health["in_flight"] == 0 and health["windows_out"] == 0, health  # its windows answered: none held
        assert _metric(metrics, "acurank_backend_windows_out") == 0
        # an MCP tool call over /mcp whose client leaves is withdrawn as well (it went on making its 9 paid calls)
        before = state["requests"]
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "rerank", "arguments": body}}
        with pytest.raises(httpx.TimeoutException):
            httpx.post(server.url + "/mcp", json=call, timeout=0.6,
                       headers={"Accept": "application/json, text/event-stream"})
        time.sleep(2.5)
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert _metric(metrics, "acurank_requests_withdrawn_total") == 2, metrics
        assert state["requests"] - before <= 3, state["requests"] - before
        assert httpx.get(server.url + "/health", timeout=10).json()["in_flight"] == 0
    finally:
        code = server.stop()
        httpd.shutdown()
    assert code == 0 and "Traceback" not in server.stderr, server.stderr


def _sigterm_while_busy(server: Server, state: dict, queries: int, probe: bool = False) -> tuple[list, int]:
    """``queries`` DL19 queries of 60 documents in flight, then SIGTERM (``probe``: a new request is then refused);
    their replies and the server's exit code."""
    replies: list = []
    threads = [threading.Thread(target=lambda q=q, t=t: replies.append(
        httpx.post(server.url + "/v1/rerank", json={"query": q, "documents": t}, timeout=120)))
        for q, t in dl19_queries(queries, depth=60)]
    _start_when_busy(threads, state, queries)
    server.proc.send_signal(signal.SIGTERM)
    if probe:
        time.sleep(0.3)
        with pytest.raises(httpx.TransportError):  # no new request is taken
            httpx.post(server.url + "/v1/rerank", json={"query": "q", "documents": ["a", "b"]}, timeout=5)
    for thread in threads:
        thread.join(120)
    return replies, server.proc.wait(60)


def test_sigterm_drains_the_requests_in_flight_then_exits_0():
    httpd, state, lock = chat_server(0.3)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    server = Server("--reranker", "openai:fake", "--base-url", url, "--concurrency", "4", "--no-cache",
                    "--method", "sw-1")
    try:
        replies, code = _sigterm_while_busy(server, state, 3, probe=True)
    finally:
        server.stop()
        httpd.shutdown()
    assert [r.status_code for r in replies] == [200, 200, 200]
    assert all(len(r.json()["results"]) == 60 for r in replies)
    assert state["requests"] == 3 * 5  # sw-1 on 60 documents: 5 windows each, every one answered once
    assert code == 0, server.stderr
    assert "stopped on SIGTERM; every request it held (3) was answered" in server.stderr
    assert "Traceback" not in server.stderr


def test_what_cannot_start_is_one_line(minilm):
    port = minilm.url.rsplit(":", 1)[1]
    ran = subprocess.run([sys.executable, "-m", "acurank_cli", "serve", "--port", port, "--reranker", "minilm"],
                         capture_output=True, text=True, env=ENV, timeout=120)
    assert ran.returncode == 2 and f"--port {port}: cannot listen" in ran.stderr and "Traceback" not in ran.stderr
    for flags, said in ((["--method", "nope"], "unknown method 'nope'"),
                        (["--api-key", "short"], "at least 8 characters"),
                        (["--method", "acurank", "--budget-total", "5"], "cannot be served"),
                        (["--max-in-flight", "0"], "--max-in-flight")):
        ran = subprocess.run([sys.executable, "-m", "acurank_cli", "serve", "--port", "0", *flags],
                             capture_output=True, text=True, env=ENV, timeout=120)
        assert ran.returncode == 2 and said in ran.stderr and "Traceback" not in ran.stderr, (flags, ran.stderr)


def test_the_serving_pages_client_blocks_run_as_written(minilm, local, tmp_path):
    """docs/serve.md's cohere, LangChain and LlamaIndex blocks, run against the server: what each prints is the
    Python API's order of the same documents."""
    from conftest import run_readme_block

    for client in ("cohere", "langchain_cohere", "llama_index.postprocessor.cohere_rerank"):
        pytest.importorskip(client)
    env = {"ACURANK_URL": minilm.url, "ACURANK_API_KEY": KEY}
    flea = "how long is the life cycle of a flea"
    cases = {
        "serve-cohere": ["Fleas live two to three months; the cycle from egg to adult takes 12 days to a year.",
                         "The cat sat on the mat.", "A flea's life cycle has four stages: egg, larva, pupa and adult.",
                         "Dogs need regular flea treatment in summer."],
        "serve-langchain": ["The cat sat on the mat.", "A flea's life cycle has four stages: egg, larva, pupa and adult.",
                            "Fleas live two to three months."],
        "serve-llamaindex": ["The cat sat on the mat.", "A flea's life cycle has four stages.",
                             "Fleas live two to three months."],
    }
    for marker, docs in cases.items():
        ran = run_readme_block(marker, tmp_path / f"{marker}.py", env)
        assert ran.returncode == 0, ran.stderr[-2000:]
        expected = local.rerank(flea, docs, top_k=2).docs
        lines = ran.stdout.strip().splitlines()
        assert len(lines) == 2, ran.stdout
        if marker == "serve-cohere":
            assert [int(line.split()[0]) for line in lines] == [int(d.id) for d in expected]
        else:
            assert [line.split(" ", 1)[1] for line in lines] == [d.text for d in expected]
        assert [float(line.split()[0 if marker != "serve-cohere" else 1]) for line in lines] == pytest.approx(
            [round(d.p_topk, 3) for d in expected], abs=1e-3)


def test_a_failing_backend_is_a_502_and_serving_goes_on():
    import socket

    with socket.socket() as s:  # a port nothing listens on: the LLM server is down
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    server = Server("--reranker", "openai:fake", "--base-url", f"http://127.0.0.1:{dead}/v1", "--retries", "0",
                    "--no-cache", "--method", "sw-1")
    try:
        for _ in range(2):
            reply = httpx.post(server.url + "/v2/rerank", json={"query": "q", "documents": ["a", "b", "c"]}, timeout=60)
            assert reply.status_code == 502, reply.text
            message = reply.json()["message"]
            assert message.startswith("the reranker failed (request ") and "127.0.0.1" not in message, message
        # the MCP tool goes through the same exchange: the same line as a tool error, the same log line and count
        said = mcp_rerank(server.url, None, {"query": "q", "documents": ["a", "b", "c"]})
        assert said.is_error and said.content[0].text.startswith(
            "Error executing tool rerank: the reranker failed (request ") and "127.0.0.1" not in said.content[0].text
        assert httpx.get(server.url + "/health", timeout=10).json() == {
            "status": "ok", "model": "openai:fake", "method": "sw-1", "in_flight": 0, "queued": 0,
            "windows_out": 0}  # the failed windows hold nothing
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert _metric(metrics, "acurank_backend_failures_total") == 3
        assert 'acurank_requests_total{endpoint="mcp:rerank",status="502"} 1.0' in metrics
    finally:
        code = server.stop()
    assert code == 0 and "Traceback" not in server.stderr, server.stderr
    assert server.stderr.count("the reranker failed: openai:") == 3  # why, in the server's log


def test_the_call_cache_answers_a_repeated_request_and_a_slow_one_is_504(tmp_path):
    httpd, state, lock = chat_server(0.0)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    server = Server("--reranker", "openai:fake", "--base-url", url, "--cache", str(tmp_path / "calls.sqlite"),
                    "--method", "sw-1")
    query, texts = dl19_queries(1, depth=40)[0]  # sw-1 on 40 documents: windows 21-40, 11-30, 1-20
    try:
        first = httpx.post(server.url + "/v2/rerank", json={"query": query, "documents": texts}, timeout=60).json()
        paid = state["requests"]
        again = httpx.post(server.url + "/v2/rerank", json={"query": query, "documents": texts}, timeout=60).json()
        assert first["meta"]["acurank"]["calls"] == 3 and first["meta"]["acurank"]["cached_calls"] == 0
        assert again["meta"]["acurank"]["cached_calls"] == 3 and state["requests"] == paid == 3
        assert again["results"] == first["results"]
    finally:
        assert server.stop() == 0, server.stderr
        httpd.shutdown()
    httpd, state, lock = chat_server(1.0)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    server = Server("--reranker", "openai:fake", "--base-url", url, "--no-cache", "--method", "sw-1",
                    "--request-timeout", "1.5")
    try:
        reply = httpx.post(server.url + "/v2/rerank", json={"query": query, "documents": texts}, timeout=60)
        assert reply.status_code == 504 and "1.5 s" in reply.json()["message"]
        time.sleep(1.5)
        assert state["requests"] <= 2  # the third window was never sent
        assert _metric(httpx.get(server.url + "/metrics", timeout=10).text, "acurank_requests_withdrawn_total") == 1
    finally:
        assert server.stop() == 0, server.stderr
        httpd.shutdown()
    assert "Traceback" not in server.stderr


def test_keys_from_the_environment_calls_capped_and_fields_json_cannot_carry(tmp_path):
    """Keys in $ACURANK_API_KEYS may be written with spaces after the commas; a method that asks for more than
    --max-calls is stopped with a 422 naming it; a document field holding NaN or infinity is a 400 naming it
    (JSON cannot carry it back); HEAD /health answers; a request's internal id never shows in a message."""
    import os

    env = {**ENV, "ACURANK_API_KEYS": "key-one-12345, key-two-67890"}
    server = Server("--reranker", "minilm", "--no-cache", "--max-calls", "5", env=env)
    proc = server.proc
    try:
        with httpx.Client(timeout=60) as client:
            for key in ("key-one-12345", "key-two-67890"):
                ok = client.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {key}"},
                                 json={"query": "q", "documents": ["a", "b"]})
                assert ok.status_code == 200, (key, ok.text)
            auth = {"Authorization": "Bearer key-two-67890"}
            # sw-3 on 40 documents: 3 passes of 3 windows, one at a time; the sixth window passes the cap of 5
            capped = client.post(server.url + "/v2/rerank", headers=auth,
                                 json={"query": "q", "documents": [f"doc {i}" for i in range(40)], "method": "sw-3"})
            assert capped.status_code == 422 and capped.json()["field"] == "method", capped.text
            assert "5 calls" in capped.json()["message"]
            # sliding windows take no budget: the remedy is another method, never a budget
            assert "takes no budget" in capped.json()["message"] and "give a budget" not in capped.json()["message"]
            many = client.post(server.url + "/v2/rerank", headers=auth,
                               json={"query": "q", "documents": ["a", "b"], "top_n": 99999999999999999999999999})
            assert many.status_code == 200 and len(many.json()["results"]) == 2, many.text
            assert "99999999999999999999999999" not in many.text  # top_n is bounded by the documents given
            for raw, field in ((b'{"query": "q", "documents": [{"text": "b", "x": NaN}, "c"], "return_documents": true}',
                                "documents[0].x"),
                               (b'{"query": "q", "documents": ["c", {"text": "b", "y": [1, -Infinity]}]}',
                                "documents[1].y[1]"),
                               (b'{"query": "q", "documents": [{"text": "b", "z": {"w": 1e999}}]}',
                                "documents[0].z.w")):
                bad = client.post(server.url + "/v1/rerank", headers={**auth, "Content-Type": "application/json"},
                                  content=raw)
                assert bad.status_code == 400 and bad.json()["field"] == field, bad.text
            tour = client.post(server.url + "/v2/rerank", headers=auth,
                               json={"query": "q", "documents": ["a", "b"], "method": "tourrank-1"})
            if tour.status_code == 400:
                assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", tour.json()["message"]), tour.text
            assert client.head(server.url + "/health").status_code == 200
            metrics = client.get(server.url + "/metrics", headers=auth).text
            assert _metric(metrics, "acurank_requests_withdrawn_total") == 0
            # every window sent is a call counted, the capped request's 5 too (it counted none: only answers did)
            windows = _metric(metrics, "acurank_backend_windows_total")
            assert windows >= 2 + 5 + 1 and _metric(metrics, "acurank_reranker_calls_total") == windows, metrics
            assert _metric(metrics, 'acurank_tokens_total{kind="input"}') > 0
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        server.stop()
    assert "Traceback" not in server.stderr, server.stderr


@pytest.mark.parametrize("first,second", [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM, signal.SIGTERM),
                                          (signal.SIGTERM, signal.SIGINT), (signal.SIGINT, signal.SIGTERM)])
def test_a_second_signal_stops_at_once_cuts_off_the_requests_in_flight_and_says_so(first, second):
    httpd, state, lock = chat_server(1.0)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    server = Server("--reranker", "openai:fake", "--base-url", url, "--concurrency", "2", "--no-cache",
                    "--method", "sw-3")
    replies: list = []

    def ask(i: int) -> None:
        try:
            replies.append(httpx.post(server.url + "/v2/rerank", timeout=60,
                                      json={"query": f"q{i}", "documents": [f"d{j}" for j in range(25)]}))
        except httpx.TransportError as exc:  # the connection closed under it: also an honest end
            replies.append(exc)

    try:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
        _start_when_busy(threads, state, 2)
        server.proc.send_signal(first)
        time.sleep(0.5)
        server.proc.send_signal(second)
        code = server.proc.wait(30)  # at once: each request has >= 9 windows of 1 s left
        for t in threads:
            t.join(60)
    finally:
        server.stop()
        httpd.shutdown()
    assert code == 128 + second, server.stderr
    assert "Traceback" not in server.stderr, server.stderr
    assert "never awaited" not in server.stderr and "Task was destroyed" not in server.stderr, server.stderr
    assert f"stopped at once on a second {signal.Signals(second).name}: of the 3 requests held" in server.stderr
    assert "every request it held" not in server.stderr
    for reply in replies:
        if isinstance(reply, httpx.Response):
            assert reply.status_code == 503 and reply.json()["message"] == "the server stopped before answering"


def test_a_thinking_backends_tokens_are_counted_apart_in_meta_usage_and_metrics():
    """A server that reasons (usage: 57 completion tokens, 50 of them reasoning) on one query and whose thought is
    cut by the limit on another: the answer's meta and Jina usage say the thought apart, /metrics counts it."""
    from fake_chat_server import FakeServer

    def respond(n, body):
        user = body["messages"][-1]["content"]
        if "query: cut" in user:
            message, finish, usage = {"content": "<think>\nAt first glance [1] > [2]. Hmm"}, "length", {
                "prompt_tokens": 100, "completion_tokens": 64}
        else:
            message, finish = {"content": " > ".join(f"[{i}]" for i in range(n, 0, -1))}, "stop"
            usage = {"prompt_tokens": 100, "completion_tokens": 57, "completion_tokens_details": {"reasoning_tokens": 50}}
        return 200, {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
                     "usage": usage}

    with FakeServer(lambda q, a: ("ok", 0.0), respond) as fake:
        server = Server("--reranker", "openai:qwen3", "--base-url", fake.base_url, "--no-cache", "--method", "sw-1",
                        "--thinking", "on", "--thinking-budget", "64")
        try:
            docs = [f"passage {i}" for i in range(4)]
            ok = httpx.post(server.url + "/v1/rerank", json={"query": "alpha", "documents": docs}, timeout=60).json()
            usage = ok["meta"]["acurank"]
            assert ok["results"][0]["index"] == 3 and usage["calls"] == 1  # the answer's reversed order
            assert (usage["thinking_calls"], usage["reasoning_tokens"], usage["output_tokens"]) == (1, 50, 7)
            assert ok["meta"]["tokens"]["reasoning_tokens"] == 50 and "thought_cut" not in usage
            assert ok["usage"]["total_tokens"] == usage["input_tokens"] + 7 + 50
            cut = httpx.post(server.url + "/v2/rerank", json={"query": "cut", "documents": docs}, timeout=60).json()
            assert cut["meta"]["acurank"]["thought_cut"] == 1
            assert [r["index"] for r in cut["results"]] == [0, 1, 2, 3]  # the presented order, no decoy read
            metrics = httpx.get(server.url + "/metrics", timeout=10).text
            assert _metric(metrics, 'acurank_tokens_total{kind="reasoning"}') >= 50
            assert _metric(metrics, "acurank_thinking_calls_total") == 2
            assert _metric(metrics, "acurank_thought_cut_total") == 1
        finally:
            code = server.stop()
    assert code == 0 and "Traceback" not in server.stderr, server.stderr


def test_a_drain_whose_requests_time_out_says_so_and_every_status_is_counted():
    httpd, state, lock = chat_server(0.5)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    server = Server("--reranker", "openai:fake", "--base-url", url, "--concurrency", "2", "--no-cache",
                    "--method", "sw-1", "--request-timeout", "1.5")
    try:
        assert httpx.get(server.url + "/nowhere", timeout=10).status_code == 404
        assert httpx.get(server.url + "/v2/rerank", timeout=10).status_code == 405
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
        metrics = httpx.get(server.url + "/metrics", timeout=10).text
        assert _metric(metrics, 'acurank_requests_total{endpoint="other",status="404"}') == 1
        assert _metric(metrics, 'acurank_requests_total{endpoint="/v2/rerank",status="405"}') == 1
        assert _metric(metrics, 'acurank_requests_total{endpoint="/health",status="200"}') == 1
        replies, code = _sigterm_while_busy(server, state, 2)  # 5 windows of 0.5 s each, in turn: past 1.5 s
    finally:
        server.stop()
        httpd.shutdown()
    assert [r.status_code for r in replies] == [504, 504] and code == 0, server.stderr
    assert "of the 2 requests it held, 0 answered, 2 timed out (504)" in server.stderr, server.stderr
    assert "every request it held" not in server.stderr


def test_a_request_instruction_reaches_the_prompt_and_a_template_is_chosen_at_start(tmp_path):
    """serve --prompt FILE --instruction DEFAULT: a request's ``instruction`` replaces the default in that request's
    prompts only (the loopback LLM server sees it), another request gets the default; a backend that puts no
    instruction in a prompt (minilm) refuses the field with a 400 naming it."""
    from fake_chat_server import FakeServer

    template = tmp_path / "t.yaml"
    template.write_text('method: "singleturn_listwise"\nsystem_message: "Rank passages."\nprefix: |\n'
                        '  Task: {instruction}\n  the search query: {query}.\nbody: |\n  [{rank}] {candidate}\n'
                        'suffix: "Rank the {num} passages."\n'
                        'output_validation_regex: r"^\\[\\d+\\]( > \\[\\d+\\])*$"\noutput_extraction_regex: r"\\[(\\d+)\\]"\n')
    with FakeServer(lambda q, a: ("ok", 0.0)) as llm:
        server = Server("--reranker", "openai:fake", "--base-url", llm.base_url, "--prompt", str(template),
                        "--instruction", "the default task", "--no-cache", "--method", "sw-1")
        try:
            own = httpx.post(server.url + "/v2/rerank", timeout=60, json={
                "query": "fleas", "documents": ["a", "b", "c"], "instruction": "the request's own task"})
            default = httpx.post(server.url + "/v2/rerank", timeout=60, json={"query": "cats", "documents": ["a", "b"]})
        finally:
            server.stop()
    assert own.status_code == default.status_code == 200, (own.text, default.text)
    users = [b["messages"][1]["content"] for b in llm.bodies]
    assert [u.split("\n")[0] for u in users] == ["Task: the request's own task", "Task: the default task"]
    assert own.json()["results"][0]["index"] == 2  # the loopback LLM ranks [3] first: read through the template


def test_a_backend_without_prompts_refuses_an_instruction(minilm):
    refused = httpx.post(minilm.url + "/v2/rerank", timeout=60, headers={"Authorization": f"Bearer {KEY}"},
                         json={"query": "q", "documents": ["a", "b"], "instruction": "prefer a"})
    assert refused.status_code == 400 and refused.json()["field"] == "instruction", refused.text


def test_max_chunks_per_doc_ranks_long_documents_by_their_passages(minilm):
    """Cohere v1's max_chunks_per_doc, honoured (no warning): the documents split into passages of 150 words (the
    server was started without --passages), at most that many a document; the order is the Python API's with the
    same passages; each split document returned with its scoring passage; a one-word document, a 100k-word one
    (cut to --max-tokens-per-doc words first) and one without spaces are served."""
    cohere = pytest.importorskip("cohere")
    from acurank_cli.api import Reranker

    query = "how long is the life cycle of a flea"
    filler = "The shipping company's quarterly report lists container volumes and fuel prices. " * 30  # 360 words
    docs = ["Fleas", filler + "The flea life cycle lasts from two weeks to eight months.", "猫" * 400,
            "Fleas are small wingless insects that feed on blood."]
    v1 = cohere.Client(api_key=KEY, base_url=minilm.url)
    got = v1.rerank(model="acurank", query=query, documents=docs, max_chunks_per_doc=4, return_documents=True)
    with Reranker("minilm", method="acurank", cache=None, passages="150:75", max_passages=4) as rr:
        expected = rr.rerank(query, docs)
    assert [r.index for r in got.results] == [int(d.id) for d in expected.docs]
    assert [r.relevance_score for r in got.results] == pytest.approx([d.p_topk for d in expected.docs])
    returned = {r.index: (r.model_extra or {}).get("passage") for r in got.results}
    wanted = {int(d.id): d for d in expected.docs}
    for index in (1, 2):  # the two long documents: their scoring passage, as the API names it
        assert returned[index] == {"index": wanted[index].passage.index, "text": wanted[index].passage_text,
                                   "words": [wanted[index].passage.start, wanted[index].passage.end]}
        assert returned[index]["text"] in docs[index] and returned[index]["words"][1] - returned[index]["words"][0] == 150
    assert returned[0] is None and returned[3] is None
    meta = got.meta.model_extra or {}
    assert "warnings" not in meta and meta["acurank"]["passages"] == {"ranked": 2 + 4 + 4, "split": 2, "capped": 1}
    huge = " ".join(["word"] * 100_000) + " fleas"
    reply = httpx.post(f"{minilm.url}/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, timeout=120,
                       json={"query": query, "documents": ["a", huge, "猫" * 100], "max_chunks_per_doc": 2,
                             "return_documents": True})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["meta"]["warnings"] == ["1 document cut to 4096 tokens (max_tokens_per_doc)"]
    assert body["meta"]["acurank"]["passages"] == {"ranked": 1 + 2 + 1, "split": 1, "capped": 1}
    bad = httpx.post(f"{minilm.url}/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                     json={"query": query, "documents": ["a"], "max_chunks_per_doc": 0})
    assert bad.status_code == 400 and bad.json()["field"] == "max_chunks_per_doc"


def test_a_server_with_a_calibration_map_answers_p_relevant_and_p_none(tmp_path):
    """``serve --calibration MAP``: relevance_score is the map's P(relevant), as the Python API gives it with the same
    map; meta.acurank says so and carries P(none); Cohere's client reads the answer unchanged. A map that does not
    load, or a method without ratings, stops the server before it starts, in one line."""
    cohere = pytest.importorskip("cohere")
    from acurank_cli.api import Reranker
    from acurank_cli.errors import InputError
    from acurank_cli.relevance import CalibrationMap

    path = tmp_path / "map.json"  # fit at k = 10: every request keeps k = 10, top_n = 5 only cuts the list
    CalibrationMap(2, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.8, 1.5, -0.3), -1.0, {"k": 10}).save(path)
    server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY, "--calibration", str(path))
    try:
        v2 = cohere.ClientV2(api_key=KEY, base_url=server.url)
        with Reranker("minilm", method="acurank", cache=None, calibration=str(path)) as rr:
            for query, texts in dl19_queries(2):
                expected = rr.rerank(query, texts, top_k=5)
                assert expected.k == 10
                for method in ("acurank", "acurank-9"):  # the server's method, and one the request names
                    got = v2.rerank(model=method, query=query, documents=texts, top_n=5)
                    meta = (got.meta.model_extra or {})["acurank"]
                    assert meta["relevance_score"] == "p_relevant" and meta["grade"] == 2 and meta["k"] == 10
                    if method == "acurank":
                        assert [r.index for r in got.results] == [int(d.id) for d in expected.docs]
                        assert [r.relevance_score for r in got.results] == pytest.approx(
                            [d.p_relevant for d in expected.docs])
                        assert meta["p_none"] == pytest.approx(expected.p_none)
            # a request the map cannot apply to is refused, naming its field, never answered with p_topk or a position
            headers = {"Authorization": f"Bearer {KEY}"}
            for extra, field in (({"method": "sw-1"}, "method"), ({"max_chunks_per_doc": 2}, "max_chunks_per_doc")):
                reply = httpx.post(server.url + "/v2/rerank", headers=headers, timeout=60,
                                   json={"query": query, "documents": texts[:3], **extra})
                assert reply.status_code == 400 and reply.json()["field"] == field, reply.text
            assert "keeps no ratings to calibrate" in httpx.post(
                server.url + "/v2/rerank", headers=headers, timeout=60,
                json={"query": query, "documents": texts[:3], "method": "sw-1"}).json()["message"]
        # the API: a map at another k is refused as the command line refuses it (it was applied at k = 5 in silence)
        with pytest.raises(InputError, match=r"^calibration: the map was fit on p_topk at k = 10 and this k is 5"):
            Reranker("minilm", method="acurank", calibration=str(path), k=5)
    finally:
        assert server.stop() == 0
    # (a map fit with a pivot is served: each request gives its pivot, tests/serve/test_mcp.py)
    for flags, said in ((("--calibration", str(tmp_path / "none.json")), "no such file"),
                        (("--calibration", str(path), "--method", "sw-1"), "keeps no ratings")):
        ran = subprocess.run([sys.executable, "-m", "acurank_cli", "serve", "--port", "0", "--reranker", "minilm",
                              *flags], capture_output=True, text=True, env=ENV, timeout=120)
        assert ran.returncode == 2 and said in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr


def test_a_served_map_is_checked_for_its_reranker_and_method_as_rerank_checks_it(tmp_path):
    """serve and mcp check a map's reranker and method as ``rerank`` does (issue 82: the CLI's rule at every
    entrance): another reranker stops the server before it starts, in one line naming both; a request naming another
    method than the map's is a 400 naming 'method'; --allow-map-mismatch lets both through."""
    from acurank_cli.relevance import CalibrationMap

    def fit_with(backend: str) -> str:
        path = tmp_path / f"{backend}.json"
        CalibrationMap(2, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.8, 1.5, -0.3), -1.0,
                       {"k": 10, "backend": backend, "method": "acurank"}).save(path)
        return str(path)

    for command in ("serve", "mcp"):
        ran = subprocess.run([sys.executable, "-m", "acurank_cli", command, "--reranker", "minilm", "--calibration",
                              fit_with("simulated"), *(["--port", "0"] if command == "serve" else [])],
                             capture_output=True, text=True, env=ENV, timeout=120, stdin=subprocess.DEVNULL)
        assert ran.returncode == 2 and ran.stderr.strip().splitlines() == [
            "acurank: error: --calibration: the map was fit with reranker simulated and this run's reranker is "
            "minilm: its P(relevant) reads the ratings one reranker makes; fit a map with minilm, or say "
            "--allow-map-mismatch"], ran.stderr
    headers = {"Authorization": f"Bearer {KEY}"}
    query, texts = dl19_queries(1, depth=5)[0]
    for allowed in (False, True):
        flags = ("--allow-map-mismatch",) if allowed else ()
        server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY, "--calibration",
                        fit_with("simulated" if allowed else "minilm"), *flags)
        try:
            same = httpx.post(server.url + "/v2/rerank", headers=headers, timeout=60,
                              json={"query": query, "documents": texts})
            other = httpx.post(server.url + "/v2/rerank", headers=headers, timeout=60,
                               json={"query": query, "documents": texts, "method": "acurank-9"})
        finally:
            assert server.stop() == 0
        assert same.status_code == 200 and same.json()["meta"]["acurank"]["relevance_score"] == "p_relevant"
        if allowed:
            assert other.status_code == 200, other.text
        else:
            assert other.status_code == 400 and other.json()["field"] == "method", other.text
            assert other.json()["message"] == (  # the server's words (stop 98's held-out case: the CLI's were said)
                "this server's --calibration map: the map was fit with method acurank and this request's method is "
                "acurank-9: its P(relevant) reads the ratings one method makes; fit a map with acurank-9, or start "
                "the server with --allow-map-mismatch"), other.text


def test_the_methods_warnings_reach_api_and_server_callers_and_mcp_bodies_follow_the_rest_rules():
    """The method's warning of a call's documents before any call (first-stage scores too small for the paper's
    prior under init score) was said by the command line only: admission dropped it. The API warns in the same
    words, and a server says it in meta.warnings (the third trial). Scores of 0.5 and below: median 0.43."""
    import warnings

    import httpx

    from acurank_cli.api import Reranker

    docs = [{"text": f"fleas live {i} weeks", "score": round(0.5 - i / 100, 2)} for i in range(15)]
    with Reranker("minilm", init="score", cache=None) as rr, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rr.rerank("how long do fleas live", docs)
        rr.rerank("how long do fleas live", [{**d, "score": d["score"] * 20} for d in docs])  # median 8.6: none
    said = [str(w.message) for w in seen if "paper's prior" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("the first-stage scores are small for the paper's prior (median 0.43")
    assert "init='zscore'" in said[0] and seen[0].filename == __file__  # the caller's line, not the API's
    server = Server("--reranker", "minilm", "--no-cache", "--init", "score")
    try:
        body = {"query": "how long do fleas live", "documents": docs}
        meta = httpx.post(server.url + "/v2/rerank", json=body, timeout=60).json()["meta"]
        assert meta["warnings"] == said and "warnings" not in meta["acurank"], meta
        fine = httpx.post(server.url + "/v2/rerank", timeout=60,
                          json={**body, "documents": [{**d, "score": d["score"] * 20} for d in docs]}).json()["meta"]
        assert "warnings" not in fine, fine
        # documents without scores: their places (4 .. 1) stand in, and no score of the caller's is warned of
        unscored = httpx.post(server.url + "/v2/rerank", timeout=60, json={**body, "documents": ["a", "b", "c", "d"]})
        assert "warnings" not in unscored.json()["meta"], unscored.text
        # /mcp's messages by the REST body's rules: a field given twice refused naming where (MCP kept the last), a
        # byte order mark ignored (it was a parse error)
        mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        call = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "rerank", "arguments": '
                '{"query": "x", "query": "fleas", "documents": ["cats", "fleas"]}}}')
        twice = httpx.post(server.url + "/mcp", content=call.encode(), headers=mcp, timeout=60)
        assert twice.status_code == 400 and twice.json() == {
            "message": "params.arguments.query is given twice in one object: give each field once",
            "field": "params.arguments.query"}, twice.text
        marked = httpx.post(server.url + "/mcp", headers=mcp, timeout=60,
                            content=b"\xef\xbb\xbf" + call.replace('"query": "x", ', "").encode())
        assert marked.status_code == 200 and "results" in marked.json()["result"]["content"][0]["text"], marked.text
    finally:
        server.stop()
