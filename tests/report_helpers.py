"""What the report tests share: synthetic datasets of runs, qrels and stats (deterministic), a trace, the CLI
runner and the checks of rendered tables and plots."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

from scipy import stats as sst

from conftest import acurank

from acurank_cli.evaluation import evaluate
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.io.runs import read_run
from acurank_cli.report.collection import (
    build_collection,
)
from acurank_cli.report.tables import build_table



def cli(*args):
    """``acurank ARGS`` in-process, its exit code kept (no raise)."""
    return acurank(*args, check=False)



# ------------------------------------------------------------------------------------- fixtures

SAMPLE = Path(__file__).resolve().parents[1] / "sample_runs"
N_DOCS = 20


def _write_run(path: Path, ranking: dict[str, list[str]], tag: str, base: float = 10.0) -> None:
    with path.open("w") as fh:
        for qid, docs in ranking.items():
            for i, d in enumerate(docs):
                fh.write(f"{qid} Q0 {d} {i + 1} {base + N_DOCS - i:.4f} {tag}\n")


def _noisy_order(rng: random.Random, grades: dict[str, int], noise: float) -> list[str]:
    docs = [f"d{i}" for i in range(N_DOCS)]
    return sorted(docs, key=lambda d: -(grades.get(d, 0) + rng.gauss(0, noise)))


def make_dataset(root: Path, name: str, seed: int, n_queries: int = 14, methods=("bm25", "base", "fancy"),
                 tokens: bool = True, extra_unjudged: bool = True) -> Path:
    """A dataset folder: qrels.txt, topics.tsv, <method>.run and <method>.stats.jsonl (not for bm25)."""
    rng = random.Random(seed)
    folder = root / name
    folder.mkdir(parents=True)
    qids = [f"{name}q{i}" for i in range(n_queries)]
    qrels = {q: {f"d{i}": rng.choice([0, 0, 1, 2, 3]) for i in range(N_DOCS)} for q in qids}
    with (folder / "qrels.txt").open("w") as fh:
        for q, docs in qrels.items():
            for d, g in docs.items():
                fh.write(f"{q} 0 {d} {g}\n")
    with (folder / "topics.tsv").open("w") as fh:
        for i, q in enumerate(qids):
            fh.write(f"{q}\t" + " ".join(["word"] * (1 + i % 4)) + "\n")
    noise = {"bm25": 3.0, "base": 1.5, "fancy": 0.6, "solo": 1.0}
    for m in methods:
        ranking = {q: _noisy_order(rng, qrels[q], noise.get(m, 1.0)) for q in qids}
        if m == "bm25":
            # first-stage scores vary per query (for WIG)
            with (folder / "bm25.run").open("w") as fh:
                for q, docs in ranking.items():
                    top = rng.uniform(5, 30)
                    for i, d in enumerate(docs):
                        fh.write(f"{q} Q0 {d} {i + 1} {top * (1 - i / (N_DOCS + 5)):.6f} bm25\n")
            continue
        if extra_unjudged:  # a query the run has and the qrels do not judge: its stats must not count
            ranking[f"{name}unjudged"] = [f"d{i}" for i in range(N_DOCS)]
        _write_run(folder / f"{m}.run", ranking, m)
        with (folder / f"{m}.stats.jsonl").open("w") as fh:
            for q in qids + ([f"{name}unjudged"] if extra_unjudged else []):
                calls = {"base": 9, "fancy": rng.randint(10, 60), "solo": 5}.get(m, 3)
                if q.endswith("unjudged"):
                    calls = 10_000  # must not count: no qrels for this query
                rec = {"qid": q, "method": m, "calls": calls, "docs_sent": calls * 20, "iterations": [],
                       "seconds": 0.01 * calls, "parse_counts": {"ok": calls}, "cached_calls": 0, "rerank_seconds": 0.0}
                if tokens:
                    rec.update({"input_tokens": 1000 * calls, "output_tokens": 50 * calls})
                fh.write(json.dumps(rec) + "\n")
    return folder


def make_runs_dir(tmp_path: Path) -> Path:
    """Two datasets (alpha: four methods, beta: three) under tmp_path/runs: the ``runs_dir`` fixture (conftest)."""
    root = tmp_path / "runs"
    make_dataset(root, "alpha", 1, methods=("bm25", "base", "fancy", "solo"))
    make_dataset(root, "beta", 2, n_queries=11)
    return root


def _ndcg(folder: Path, method: str) -> dict[str, float]:
    run = read_run(folder / f"{method}.run").scores()
    return {q: v["ndcg_cut_10"] for q, v in evaluate(run, read_qrels(folder / "qrels.txt")).per_query.items()}


def _report(runs_dir, **kw):
    coll = build_collection(dirs=[runs_dir])
    return build_table([coll], {"alpha": "bm25", "beta": "bm25"}, **kw)


def _md_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def _check_svg(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg") and path.stat().st_size > 10_000




def make_trace(path: Path, resumed: bool = False) -> None:
    rng = random.Random(0)
    recs = []
    for qid in ("q1", "q2"):
        mu = {f"d{i}": 25 - i + rng.uniform(-1, 1) for i in range(15)}
        sigma = {d: 8.0 for d in mu}
        for it, phase in [(0, "initial"), (2, "adaptive"), (3, "adaptive"), (4, "final"), (5, "done")]:
            for d in mu:
                mu[d] += rng.uniform(-1.5, 1.5)
                sigma[d] *= 0.8
            order = sorted(mu, key=lambda d: -mu[d])
            t = mu[order[9]] - 0.5
            recs.append({"qid": qid, "method": "acurank", "iteration": it, "phase": phase, "t": t,
                         "docs": [{"docid": d, "mu": mu[d], "sigma": sigma[d],
                                   "s": 1 - sst.norm.cdf((t - mu[d]) / sigma[d]), "rank": order.index(d) + 1}
                                  for d in mu]})
    lines = [json.dumps(r) for r in recs]
    if resumed:  # a crashed first attempt of q1 recorded two steps with different values
        stale = [dict(recs[0], t=-99.0), dict(recs[1], t=-99.0)]
        lines = [json.dumps(r) for r in stale] + lines
    path.write_text("\n".join(lines) + "\n")


