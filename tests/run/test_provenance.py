"""Runs record where they came from (the meta file's ``provenance``: acurank, Python, the engines' versions, the
model and its revision or weights digest, device, dtype, prompt format); ``report provenance`` shows it; a resume
across a changed engine version or model revision is refused in one line naming the difference."""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLE, acurank

from acurank_cli.io.run_files import changes


@pytest.fixture(scope="module")
def minilm_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prov")
    run = folder / "m.run"
    acurank("rerank", SAMPLE / "dl19" / "bm25.run", "--reranker", "minilm", "--method", "sw-1", "--qids",
            "264014,104861", "--no-cache", "-o", run)
    return run


def _meta(run):
    return run.with_name(run.name + ".meta.json")


def test_the_meta_file_records_software_and_model(minilm_run):
    import platform

    import tokenizers
    import torch

    prov = json.loads(_meta(minilm_run).read_text())["provenance"]
    assert prov["python"] == platform.python_version() and prov["acurank"]
    # minilm reads its model with torch and tokenizers (bert.py), never transformers: the packages its answers come
    # from (transformers was asserted here, and held only where an earlier test in the process had imported it)
    assert prov["packages"]["torch"] == torch.__version__ and prov["packages"]["tokenizers"] == tokenizers.__version__
    assert prov["reranker"]["backend"] == "minilm" and prov["reranker"]["device"] == "cpu"
    assert prov["reranker"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    shown = acurank("report", "provenance", minilm_run, "-f", "csv").stdout
    assert "minilm" in shown and f"torch {torch.__version__}" in shown and "all-MiniLM-L6-v2" in shown
    before = _meta(minilm_run).read_bytes()  # the meta file it reads is an input: not an output
    ran = acurank("report", "provenance", minilm_run, "-o", _meta(minilm_run), "--overwrite", check=False)
    assert ran.returncode == 2 and "which the command reads" in ran.stderr and _meta(minilm_run).read_bytes() == before


@pytest.mark.parametrize("edit, said", [
    (lambda p: p["packages"].update(torch="2.0.0"), "torch: '2.0.0' -> "),
    (lambda p: p["reranker"].update(revision="0123abcd"), "model revision: '0123abcd' -> None"),
])
def test_a_resume_across_a_changed_engine_or_model_is_refused(minilm_run, tmp_path, edit, said):
    run = tmp_path / "r.run"
    lines = minilm_run.read_text().splitlines(True)
    run.write_text("".join(lines[:100]))  # the first query finished, the second not: a resume would continue
    meta = json.loads(_meta(minilm_run).read_text())
    edit(meta["provenance"])
    _meta(run).write_text(json.dumps(meta))
    before = run.read_bytes()
    ran = acurank("rerank", SAMPLE / "dl19" / "bm25.run", "--reranker", "minilm", "--method", "sw-1", "--qids",
                  "264014,104861", "--no-cache", "--quiet", "-o", run, check=False)
    assert ran.returncode == 2 and "was made with another engine or model" in ran.stderr and said in ran.stderr, ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and run.read_bytes() == before


def test_changes_name_engines_and_model_only():
    now = {"packages": {"torch": "2.13.0", "numpy": "2.4"}, "reranker": {"model": "m", "revision": "r1"}}
    assert changes(None, now) == []  # a run made before provenance was recorded resumes
    assert changes({"packages": {"torch": "2.13.0", "numpy": "1.0"}, "reranker": {"model": "m", "revision": "r1"}},
                   now) == []  # numpy does not decide a model's answers
    assert changes({"packages": {"torch": "2.12.0"}, "reranker": {"model": "m", "revision": "r0"}}, now) == [
        "torch: '2.12.0' -> '2.13.0'", "model revision: 'r0' -> 'r1'"]


def test_an_openai_compatible_server_s_version_is_recorded_where_it_reports_one():
    """vLLM's and SGLang's servers answer GET /version; the record names it (and a server that does not, nothing)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from acurank_cli.rerankers.backend import build_reranker

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = b'{"version": "0.32.0"}' if self.path == "/version" else b"{}"
            self.send_response(200 if self.path == "/version" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        record = build_reranker("openai:served", base_url=url, tokenizer=None).provenance()
        assert record["server_version"] == "0.32.0" and record["model"] == "served"
    finally:
        server.shutdown()
    silent = build_reranker("openai:served", base_url="http://127.0.0.1:9/v1").provenance()
    assert "server_version" not in silent
