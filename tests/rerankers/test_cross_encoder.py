"""ce:MODEL with a tiny random BERT cross-encoder built here: windows ordered by its (query, passage) logits
(checked against transformers directly), pair scores reused in memory and from the store, the CLI."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("torch")

from acurank_cli.records import Doc, RerankRequest  # noqa: E402
from acurank_cli.rerankers.backend import build_reranker  # noqa: E402

from conftest import acurank, small_run  # noqa: E402
from tiny_models import build_cross_encoder_dir  # noqa: E402

QUERY = "how long is the flea life cycle"
TEXTS = ["fleas hatch in two days", "paris is the capital of france", "cats groom each day",
         "the flea life cycle lasts two weeks", "what are the months of paris"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_cross_encoder_dir(tmp_path_factory.mktemp("ce") / "tiny-ce")


def logits(folder, query, texts):
    """The model's raw score per pair, with transformers alone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.inference_mode():
        enc = tok([query] * len(texts), texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
        return model(**enc).logits[:, 0].tolist()


def request(texts, qid="q1", ids=None):
    ids = ids or tuple(f"d{i}" for i in range(len(texts)))
    return RerankRequest(qid, QUERY, tuple(ids), tuple(Doc(d, t) for d, t in zip(ids, texts)))


def test_windows_are_ordered_by_the_pair_scores(model_dir):
    rr = build_reranker(f"ce:{model_dir}", device="cpu")
    (res,) = rr.rerank([request(TEXTS)])
    expected = logits(model_dir, QUERY, TEXTS)
    assert list(res.order) == sorted(range(len(TEXTS)), key=lambda i: (-expected[i], i))
    assert [float(x) for x in res.raw.split()] == pytest.approx(expected, abs=1e-4)
    assert len(set(round(x, 4) for x in expected)) == len(TEXTS)  # distinct: the order is the model's, not ties
    assert res.input_tokens > 5 * len(TEXTS) and res.output_tokens == 0 and rr.parameters() > 10_000


def test_pair_scores_are_reused_in_memory_and_from_the_store(model_dir, tmp_path):
    cache = str(tmp_path / "calls.sqlite")
    rr = build_reranker(f"ce:{model_dir}", device="cpu", batch_size=2)
    rr.use_store(cache)
    rr.rerank([request(TEXTS[:3]), request(TEXTS[2:])])  # 5 distinct pairs (TEXTS[2] twice)
    assert rr.scored == 5 and rr.forward_passes == 3 and rr.store.stored == 5
    rr.rerank([request(TEXTS[::-1])])  # every pair known
    assert rr.scored == 5
    (mem,) = rr.rerank([request(TEXTS)])
    rr.close()
    again = build_reranker(f"ce:{model_dir}", device="cpu")
    again.use_store(cache)
    (res,) = again.rerank([request(TEXTS)])
    assert again.scored == 0 and again.store.hits == 5 and res.order == mem.order
    other = build_reranker(f"ce:{model_dir}", device="cpu")
    other.use_store(cache)
    other.rerank([RerankRequest("q2", "another query", ("d0",), (Doc("d0", TEXTS[0]),))])
    assert other.scored == 1  # a pair is (query, passage): a new query is a new pair


def test_cli_rerank_with_ce_and_its_errors(model_dir, sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=2, depth=30)
    out = tmp_path / "ce.run"
    proc = acurank("rerank", run, "--method", "acurank", "--reranker", f"ce:{model_dir}", "--batch-size", "16",
                   "--topics", sample / "dl19" / "topics.tsv", "--corpus", sample / "dl19" / "passages.jsonl.gz",
                   "--output", out)
    assert f"with reranker ce:{model_dir}" in proc.stderr and "FLOPs estimated" in proc.stderr
    stats = [json.loads(x) for x in (tmp_path / "ce.stats.jsonl").read_text().splitlines()]
    assert [s["qid"] for s in stats] == qids and all(s["calls"] >= 2 and s["flops"] > 0 for s in stats)
    assert len(out.read_text().splitlines()) == 60
    bad = acurank("rerank", run, "--reranker", f"ce:{tmp_path / 'missing'}", "--topics", sample / "dl19" / "topics.tsv",
                  "--corpus", sample / "dl19" / "passages.jsonl.gz", check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "cannot load the cross-encoder" in bad.stderr


def test_the_bills_counter_counts_a_window_as_a_call_reports_it_with_no_weights(model_dir):
    """ce:'s counter for the bill (its tokenizer and config only) gives each window what the model's call reports in
    input_tokens, with --max-length too; and the answer carries each pair's logit as its absolute score."""
    from acurank_cli.rerankers.backend import BACKENDS

    for max_length in (None, 8):
        options = {"device": "cpu", **({} if max_length is None else {"max_length": max_length})}
        rr = build_reranker(f"ce:{model_dir}", **options)
        spec = BACKENDS.entries["ce"]
        counter = spec.counts(str(model_dir), spec.make_options(options))
        for window in (TEXTS, TEXTS[:2], TEXTS[1:4]):
            (res,) = rr.rerank([request(window)])
            assert counter.window_tokens(request(window)) == (res.input_tokens, 0) == rr.window_tokens(request(window))
            assert res.absolute == pytest.approx(logits(model_dir, QUERY, window), abs=1e-4) if max_length is None \
                else len(res.absolute) == len(window)
