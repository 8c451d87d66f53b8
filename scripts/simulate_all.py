"""Rerank every sample dataset with every method of the core issue and the simulated reranker (noise 1.0, seed 0),
then evaluate them: ``scripts/simulate_all.sh``'s work (it calls this), written to OUT/<dataset>/<method>.run and
.stats.jsonl, each eval table printed as TSV.

Every command is the CLI's own (``acurank rerank ...``, ``acurank eval ...``), run in this one process through its
entry point, one after another: the same bytes as 36 separate ``acurank`` processes, without paying 36 times for
Python's start and numba's first kernel load (about 1.3 s of a process).

    .venv/bin/python scripts/simulate_all.py [OUT] [extra rerank flags...]   (default OUT=out/sim)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("sw-1", "sw-2", "sw-3", "tourrank-1", "tourrank-2", "ts-5-2-2-1", "ts-5-3-3-3", "acurank-9", "acurank",
           "acurank-H", "acurank-HH")
DATASETS = ("dl19", "dl20", "dl23")


def run(argv: list[str]) -> None:
    """One command line, as ``acurank`` runs it; a failure ends the script with its exit code (as ``set -e``)."""
    from acurank_cli.cli.app import main

    code = main([str(a) for a in argv])
    if code != 0:
        raise SystemExit(code)


def simulate_all(out: Path, extra: list[str]) -> None:
    for ds in DATASETS:
        data = Path("sample_runs") / ds
        (out / ds).mkdir(parents=True, exist_ok=True)
        for name in ("bm25.run", "qrels.txt", "topics.tsv"):
            shutil.copyfile(data / name, out / ds / name)
        for m in METHODS:
            run(["rerank", data / "bm25.run", "--method", m, "--reranker", "simulated", "--qrels", data / "qrels.txt",
                 "--sim-noise", "1.0", "--sim-seed", "0", "--quiet", "--overwrite", "--output", out / ds / f"{m}.run",
                 "--stats", out / ds / f"{m}.stats.jsonl", *extra])
        run(["eval", out / ds / "bm25.run", *(out / ds / f"{m}.run" for m in METHODS), "--qrels", data / "qrels.txt",
             "--format", "tsv"])
        sys.stdout.flush()


if __name__ == "__main__":
    args = sys.argv[1:]
    simulate_all(Path(args[0] if args else "out/sim"), args[1:])
