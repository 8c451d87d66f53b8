"""Can acurank-auto tell a persistently wrong reranker from a right one? (the resisting settings)

    python benchmarks/prior_shrinkage.py OUT [--settings "noise 0" persistent] [--seeds 0 1 2]
                                             [--datasets dl19 dl20 dl23 scifact]

acurank-auto-9 falls short of acurank-9 where the reranker is consistent but persistently wrong and BM25 is
strong (SciFact). This asks two questions of the same runs as ``method_comparison.py`` (same folder layout, so
OUT may be a comparison's folder and its runs are reused):

1. Would the first stage's prior, given back its weight, have fixed it? Each query's final ratings are shrunk
   towards the prior after the fact, mu0 + lambda (mu - mu0) (mu0 the initial rating, i.e. the BM25 score;
   lambda = 1 is the run as it is), and nDCG@10 is given per lambda, beside acurank-9's.
2. Could the run's own evidence have chosen lambda? The noise model that acurank-auto chose for each query,
   as its factor c (beta / S, S the query's median initial sigma), is tabulated per setting: where two
   settings want different lambdas but the answers choose the same model, nothing in the answers tells them
   apart.

Writes OUT/prior_shrinkage.md and .json.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from method_comparison import DATASETS, METHODS, SETTINGS, dataset_files, folder, label_file, run_one  # noqa: E402

from acurank_cli.evaluation import evaluate  # noqa: E402
from acurank_cli.io.run_files import read_stats  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402
from acurank_cli.method.choices import Init  # noqa: E402
from acurank_cli.method.trueskill import initial_ratings  # noqa: E402

LAMBDAS = (1.0, 0.97, 0.95, 0.9, 0.8, 0.7, 0.5, 0.0)
ROWS = ("acurank-9", "acurank-auto-9")


def shrunk(run: dict, prior: dict, lam: float) -> dict:
    """Every query's scores moved back towards the prior: mu0 + lam (mu - mu0)."""
    return {q: {d: prior[q][d] + lam * (mu - prior[q][d]) for d, mu in docs.items()} for q, docs in run.items()}


def mean_ndcg(scores: dict, qrels: dict) -> dict:
    return {q: v["ndcg_cut_10"] for q, v in evaluate(scores, qrels).per_query.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--settings", nargs="+", default=["noise 0", "persistent"], choices=list(SETTINGS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    args = ap.parse_args(argv)
    rows = {label: row for label, *row in METHODS if label in ROWS}
    result: dict = {}
    for setting in args.settings:
        result[setting] = {}
        for ds in args.datasets:
            files = dataset_files(args.out, ds)
            qrels = read_qrels(files["qrels"])
            bm25 = read_run(files["run"]).scores()
            prior, scale = {}, {}
            for q, docs in bm25.items():
                mu0, sigma0 = initial_ratings(list(docs.values()), Init.score, q)
                prior[q] = dict(zip(docs, mu0.tolist()))
                scale[q] = statistics.median(sigma0.tolist())
            per_lam = {lam: [] for lam in LAMBDAS}
            reference, factors = [], collections.Counter()
            for seed in args.seeds:
                for label in ROWS:
                    run_one(args.out, setting, seed, ds, files, (label, *rows[label]))
                base = folder(args.out, setting, seed) / ds
                auto = read_run(Path(f"{base / label_file('acurank-auto-9')}.run")).scores()
                for lam in LAMBDAS:
                    per_lam[lam].append(mean_ndcg(shrunk(auto, prior, lam), qrels))
                reference.append(mean_ndcg(read_run(Path(f"{base / label_file('acurank-9')}.run")).scores(), qrels))
                stats = read_stats(Path(f"{base / label_file('acurank-auto-9')}.stats.jsonl"))
                factors.update(f"{r.beta / scale[q]:.4g}" for q, r in stats.items() if r.beta is not None)

            def avg(per_seed: list[dict]) -> float:  # per-query mean over the seeds, then over the queries
                return statistics.mean(statistics.mean(p[q] for p in per_seed) for q in per_seed[0])

            result[setting][ds] = {"lambda": {str(lam): avg(v) for lam, v in per_lam.items()},
                                   "acurank-9": avg(reference), "chosen_c": dict(factors.most_common())}
    lines = [f"acurank-auto-9's final ratings shrunk towards the BM25 prior, mu0 + lambda (mu - mu0); nDCG@10 "
             f"(seeds {', '.join(map(str, args.seeds))}, per-query means over the seeds), acurank-9 beside it, and "
             "the noise model each query chose (c = beta / median initial sigma: queries)", "",
             "| setting | dataset | " + " | ".join(f"lambda {lam:g}" for lam in LAMBDAS) + " | acurank-9 | chosen c |",
             "|---|---|" + "---|" * (len(LAMBDAS) + 2)]
    for setting, by_ds in result.items():
        for ds, r in by_ds.items():
            best = max(r["lambda"].values())
            cells = [(f"**{v:.4f}**" if v == best else f"{v:.4f}") for v in r["lambda"].values()]
            chosen = ", ".join(f"{c}: {n}" for c, n in r["chosen_c"].items())
            lines.append(f"| {setting} | {ds} | " + " | ".join(cells) + f" | {r['acurank-9']:.4f} | {chosen} |")
        macro = {lam: statistics.mean(r["lambda"][lam] for r in by_ds.values()) for lam in map(str, LAMBDAS)}
        reference = statistics.mean(r["acurank-9"] for r in by_ds.values())
        lines.append(f"| {setting} | macro | " + " | ".join(f"{v:.4f}" for v in macro.values()) + f" | {reference:.4f} | |")
    (args.out / "prior_shrinkage.md").write_text("\n".join(lines) + "\n")
    (args.out / "prior_shrinkage.json").write_text(json.dumps({"seeds": args.seeds, "result": result}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
