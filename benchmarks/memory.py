"""Wall time and peak memory (``/usr/bin/time``'s maximum RSS) of whole commands as the input grows: synthetic
runs of Q queries x N candidates (BM25-like descending scores, 30 judged documents a query), reranked with the
simulated reranker (acurank-9 and sw-1, with and without ``--shard 1/10``), merged and evaluated.

    python benchmarks/memory.py [--sizes 700x1000 7000x1000 2000x1000] [--acurank PYTHON_ARGS...]

Each size's files are written once under benchmarks/results/memory-data/ (not committed); the table goes to
stdout and benchmarks/results/memory.json.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, save  # noqa: E402


def generate(folder: Path, queries: int, depth: int, seed: int = 0) -> tuple[Path, Path]:
    """run.trec (grouped by query, as Pyserini writes) and qrels.txt of ``queries`` x ``depth``."""
    folder.mkdir(parents=True, exist_ok=True)
    run, qrels = folder / "run.trec", folder / "qrels.txt"
    if run.exists() and qrels.exists():
        return run, qrels
    rng = random.Random(seed)
    with open(run, "w") as fr, open(qrels, "w") as fq:
        for q in range(queries):
            qid = str(100000 + q)
            score = 30.0
            lines = []
            for r in range(1, depth + 1):
                score -= rng.random() * 0.05
                lines.append(f"{qid} Q0 d{q}x{r} {r} {score:.4f} bm25\n")
            fr.write("".join(lines))
            for r in rng.sample(range(1, depth + 1), 30):
                fq.write(f"{qid} 0 d{q}x{r} {rng.choice((1, 2, 3))}\n")
    return run, qrels


def measured(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one command."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        started = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", t.name, *argv], capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr[-2000:]}")
        return wall, int(t.read().split()[-1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", nargs="+", default=["700x1000", "2000x1000", "7000x1000"])
    ap.add_argument("--methods", nargs="+", default=["acurank-9", "sw-1"])
    ap.add_argument("--acurank", nargs="+", default=[sys.executable, "-m", "acurank_cli"])
    args = ap.parse_args()
    rows = []
    for size in args.sizes:
        queries, depth = (int(x) for x in size.split("x"))
        run, qrels = generate(RESULTS / "memory-data" / size, queries, depth)
        with tempfile.TemporaryDirectory() as tmp:
            for method in args.methods:
                cmd = "baseline" if method.startswith("sw-") else "rerank"
                base = [*args.acurank, cmd, str(run), "--method", method, "--reranker", "simulated", "--qrels",
                        str(qrels), "--no-cache", "--quiet"]
                for shard in (None, "1/10"):
                    out = Path(tmp) / f"{method}-{shard or 'all'}".replace("/", "of")
                    extra = ["--shard", shard] if shard else []
                    wall, rss = measured([*base, *extra, "-o", f"{out}.run"])
                    rows.append({"size": size, "command": f"{cmd} {method}" + (f" --shard {shard}" if shard else ""),
                                 "seconds": round(wall, 2), "per_query_ms": round(1000 * wall / (queries / (10 if shard else 1)), 2),
                                 "peak_mb": round(rss)})
                    print(rows[-1], flush=True)
            parts = []
            for i in range(1, 11):
                part = Path(tmp) / f"part{i}.run"
                subprocess.run([*args.acurank, "baseline", str(run), "--method", "sw-1", "--reranker", "simulated",
                                "--qrels", str(qrels), "--no-cache", "--quiet", "--shard", f"{i}/10", "-o", str(part)],
                               check=True, capture_output=True)
                parts.append(str(part))
            wall, rss = measured([*args.acurank, "merge", *parts, "-o", str(Path(tmp) / "merged.run")])
            rows.append({"size": size, "command": "merge 10 parts", "seconds": round(wall, 2), "peak_mb": round(rss)})
            print(rows[-1], flush=True)
            wall, rss = measured([*args.acurank, "eval", str(Path(tmp) / "sw-1-all.run"), "--qrels", str(qrels)])
            rows.append({"size": size, "command": "eval", "seconds": round(wall, 2), "peak_mb": round(rss)})
            print(rows[-1], flush=True)
    print("\n| run | command | wall s | ms/query | peak RSS MB |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']} | {r['command']} | {r['seconds']} | {r.get('per_query_ms', '')} | {r['peak_mb']} |")
    save("memory", {"rows": rows})


if __name__ == "__main__":
    main()
