"""The bill before the run (``rerank --dry-run``) against the run itself (BENCHMARKS.md 28).

For each dataset, method and reranker: ``--dry-run --stats`` (20 rehearsals), then the run with ``--stats``; per
query, whether the actual calls lie in the predicted interval; in total, the predicted median against the actual
calls, and input tokens predicted against counted. The simulated reranker counts tokens with ``--sim-tokens gpt-4o``
(the published prompt fitted to 4,096 tokens, counted offline with cl100k_base). Every command runs in this process
through the CLI's own entry point; the dry run's wall time is measured around it.

    PYTHONPATH=. .venv/bin/python benchmarks/bill.py [--datasets dl19,dl20,dl23] [--noises 1,2] [--minilm dl19]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, save, table  # noqa: E402

from acurank_cli.cli.app import main as acurank  # noqa: E402

METHODS = ("acurank", "acurank-H", "acurank-9", "acurank-auto-9", "sw-1")


def _run(*args) -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = acurank([str(a) for a in args])
    if code != 0:
        raise SystemExit(f"failed ({code}): {' '.join(map(str, args))}\n{err.getvalue()}")
    return time.perf_counter() - t0


def _lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines()]


def one(dataset: str, method: str, backend: list[str], label: str, work: Path, cache: Path | None = None) -> dict:
    """One row; ``cache``: the run's call cache (MiniLM's: one per dataset, so that its methods encode each passage
    once; the calls a query makes are the method's whether an answer comes from the model or the cache)."""
    data = ROOT / "sample_runs" / dataset
    command = "baseline" if method.startswith("sw-") else "rerank"
    common = [command, data / "bm25.run", "--method", method, *backend, "--qrels", data / "qrels.txt"]
    bill = work / f"{dataset}.{method}.{label}.bill.jsonl"
    seconds = _run(*common, "--dry-run", "--stats", bill)
    stats = work / f"{dataset}.{method}.{label}.stats.jsonl"
    _run(*common, *(["--cache", cache] if cache else ["--no-cache"]), "-o", work / f"{dataset}.{method}.{label}.run",
         "--stats", stats)
    predicted = _lines(bill)
    total = predicted[-1]["total"]
    per_query = {r["qid"]: r for r in predicted[:-1]}
    actual = _lines(stats)
    inside = sum(per_query[r["qid"]]["calls"]["low"] <= r["calls"] <= per_query[r["qid"]]["calls"]["high"]
                 for r in actual)
    calls = sum(r["calls"] for r in actual)
    row = {"dataset": dataset, "method": method, "reranker": label, "queries": len(actual),
           "covered": f"{inside}/{len(actual)} ({100 * inside / len(actual):.0f}%)",
           "calls predicted": f"{total['calls']['median']:g} [{total['calls']['low']:g}-{total['calls']['high']:g}]",
           "calls actual": calls, "median off": f"{100 * (total['calls']['median'] - calls) / calls:+.1f}%",
           "exact": total["exact"], "dry run s": round(seconds, 1)}
    if "input_tokens" in total and any(r.get("input_tokens") for r in actual):
        tokens = sum(r["input_tokens"] for r in actual)
        row["tokens off"] = f"{100 * (total['input_tokens']['median'] - tokens) / tokens:+.1f}%"
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="dl19,dl20,dl23")
    ap.add_argument("--noises", default="1,2")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--minilm", default="", help="datasets to also measure with MiniLM (slow on a CPU)")
    ap.add_argument("--name", default="bill")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bill-"))
    rows = []
    for dataset in args.datasets.split(","):
        for method in args.methods.split(","):
            for noise in filter(None, args.noises.split(",")):
                backend = ["--reranker", "simulated", "--sim-noise", noise, "--sim-tokens", "gpt-4o"]
                rows.append(one(dataset, method, backend, f"simulated noise {noise}", work))
                print(rows[-1], flush=True)
            if dataset in args.minilm.split(","):
                rows.append(one(dataset, method, ["--reranker", "minilm"], "minilm", work,
                                work / f"minilm-{dataset}.sqlite"))
                print(rows[-1], flush=True)
    save(args.name, {"rows": rows})
    print(table(rows, ["dataset", "method", "reranker", "queries", "covered", "calls predicted", "calls actual",
                       "median off", "exact", "tokens off", "dry run s"]))


if __name__ == "__main__":
    main()
