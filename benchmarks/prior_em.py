"""Issue 83, item 4, as the product does it: ``rerank --calibrate --absolute`` (the map with MiniLM's own score of
each document as a feature) and ``rerank --calibration MAP --prior em`` (the map moved to the applied queries' own
share of relevant candidates by EM, Saerens, Latinne and Decaestecker 2002), measured with the command line's own
runs against the map alone (BENCHMARKS.md section 25's rows) and against section 38's figures, which the benchmark
there computed outside the product.

    PYTHONPATH=. python benchmarks/prior_em.py [--work DIR] [--out NAME]

Rows: each TREC DL year's map (all its queries) applied to the other year, and each year's map fit on its odd
queries (sorted by qid) applied to its even ones. Each cell is a run of ``acurank rerank --reranker minilm`` on the
bundled sample (grade >= 2 relevant), measured from the run's stats with acurank's own ECE (10 equal-width bins)
and Brier score against the qrels; ``inverted``: adjacent pairs whose P(relevant) rose down the returned order. About
2.5 minutes here with a warm MiniLM store (the runs share one call cache in ``--work``). Results:
benchmarks/results/prior_em.json and the table printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from acurank_cli import relevance as rel  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402

from common import save, work_and_out  # noqa: E402

SAMPLE = ROOT / "sample_runs"
GRADE = 2


def qids(ds: str) -> list[str]:
    return sorted({line.split()[0] for line in (SAMPLE / ds / "bm25.run").read_text().splitlines()})


def acurank(work: Path, *args) -> str:
    ran = subprocess.run([sys.executable, "-m", "acurank_cli", *map(str, args), "--cache", work / "calls.sqlite"],
                         capture_output=True, text=True, cwd=ROOT)
    if ran.returncode:
        raise SystemExit(ran.stderr)
    return ran.stderr


def fit(work: Path, ds: str, queries: list[str], name: str, absolute: bool) -> None:
    acurank(work, "rerank", SAMPLE / ds / "bm25.run", "--reranker", "minilm", "--calibrate", SAMPLE / ds / "qrels.txt",
            "--relevant-grade", GRADE, "--calibration", work / f"{name}.json", "-o", work / f"{name}.fit.run",
            "--overwrite", "--qids", ",".join(queries), "-q", *(["--absolute"] if absolute else []))


def applied(work: Path, ds: str, queries: list[str], name: str, prior: bool, out: str) -> dict:
    acurank(work, "rerank", SAMPLE / ds / "bm25.run", "--reranker", "minilm", "--calibration", work / f"{name}.json",
            "-o", work / f"{out}.run", "--overwrite", "--qids", ",".join(queries), "--allow-map-mismatch", "-q",
            *(["--prior", "em"] if prior else []))
    qrels = read_qrels(SAMPLE / ds / "qrels.txt")
    records = [json.loads(line) for line in (work / f"{out}.stats.jsonl").read_text().splitlines()]
    lists = [list(r["relevance"]["p"].items()) for r in records]
    p = [v for items in lists for _, v in items]
    y = [int(qrels.get(r["qid"], {}).get(d, 0) >= GRADE) for r, items in zip(records, lists) for d, _ in items]
    prior_rec = records[0]["relevance"].get("prior")
    return {"ece": rel.calibration_error(p, y)[0], "brier": rel.brier(p, y), "mean_p": float(np.mean(p)),
            "share": float(np.mean(y)), "queries": len(records),
            "inverted": sum(1 for items in lists for (_, a), (_, b) in zip(items, items[1:]) if b > a + 1e-12),
            "em_share": None if prior_rec is None else prior_rec["share"]}


def cells(work: Path, label: str, train: tuple[str, list[str]], test: tuple[str, list[str]]) -> list[dict]:
    out = []
    for absolute in (False, True):
        name = f"{label}{'.abs' if absolute else ''}"
        fit(work, *train, name, absolute)
        for prior in ((False, True) if absolute else (False,)):
            what = "map" + ("+absolute" if absolute else "") + ("+EM" if prior else "")
            out.append({"row": label, "map": what, **applied(work, *test, name, prior, f"{name}.{int(prior)}")})
    return out


def main() -> None:
    args = work_and_out(__doc__, "/tmp/acurank-prior-em", "prior_em")
    started = time.perf_counter()
    rows = []
    for train, test in (("dl19", "dl20"), ("dl20", "dl19")):
        rows += cells(args.work, f"{train}->{test}", (train, qids(train)), (test, qids(test)))
    for ds in ("dl19", "dl20"):
        rows += cells(args.work, f"{ds} odd->even", (ds, qids(ds)[::2]), (ds, qids(ds)[1::2]))
    for r in rows:
        share = "" if r["em_share"] is None else f"  EM's share {r['em_share']:.3f}"
        print(f"{r['row']:16s} {r['map']:20s} ECE {r['ece']:.4f}  Brier {r['brier']:.4f}  mean P {r['mean_p']:.3f} "
              f"(true {r['share']:.3f})  inverted {r['inverted']}{share}")
    save(args.out, {"setting": "minilm", "grade": GRADE, "rows": rows,
                    "seconds": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    main()
