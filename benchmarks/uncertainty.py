"""The uncertainty rules (--uncertainty threshold | exact | entropy): accuracy, speed and the study.

``accuracy``  the exact p_i and P(r_i = r) against Monte Carlo (10^6 seeded draws) on the rating sets of
              tests/method/test_uncertainty.py, and |sum_i p_i - k|, |sum_i P(r_i = r) - 1|; also at n = 1,000.
``speed``     time per call of each rule (median of repeats, one process): n = 100 from DL19 (the
              ratings every AcuRank iteration of the simulated reranker saw, and the initial ratings
              mu = BM25 score, sigma = mu / 3, all wide and overlapping) and n = 1,000 from SciFact's
              BM25 top-1,000 (initial ratings mu = score, sigma = mu / 3, and the same after one pass).
``study``     acurank, acurank-H, acurank-9 x threshold / exact / entropy x simulated reranker (noise 1.0,
              seeds 0, 1, 2) x DL19, DL20, DL23, SciFact BM25 top-100: nDCG@10 and calls per query (means over
              seeds), paired tests against the threshold rule, report tables and a Pareto plot.

    PYTHONPATH=. python benchmarks/uncertainty.py accuracy
    PYTHONPATH=. python benchmarks/uncertainty.py speed [--scifact-run RUN_TOP1000]
    PYTHONPATH=. python benchmarks/uncertainty.py study [--out out/uncertainty] [--jobs 2]
    PYTHONPATH=. python benchmarks/uncertainty.py table     # markdown tables of the recorded study

The study needs SciFact's BM25 run (``--scifact-run``; made with acurank index + retrieve, see README).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT / "tests"))

RULES = ("threshold", "exact", "entropy")
METHODS = ("acurank", "acurank-H", "acurank-9")
SEEDS = (0, 1, 2)
K = 10


def machine() -> dict:
    import os

    return {"python": platform.python_version(), "cores": os.cpu_count(), "numpy": np.__version__}


def cmd_accuracy(args) -> dict:
    from test_uncertainty import eq1_by_adaptive_quadrature, extreme_sets_of_1000, monte_carlo, rating_sets

    from acurank_cli.method.uncertainty import rank_probabilities

    rows = []
    for i, (name, (mu, sigma)) in enumerate(rating_sets().items()):
        mc = monte_carlo(mu, sigma, K, seed=i)
        top = rank_probabilities(mu, sigma, K, ranks=False).top
        ranks = rank_probabilities(mu, sigma, K)
        kk = min(K, len(mu))
        rows.append({
            "set": name, "n": len(mu),
            "max_err_p": float(np.abs(top - mc.sum(axis=1)).max()),
            "max_err_rank": float(np.abs(ranks.rank[:, : mc.shape[1]] - mc).max()),
            "sum_p_minus_k": float(abs(top.sum() - kk)),
            "max_rank_sum_minus_1": float(np.abs(ranks.rank.sum(axis=0) - 1).max()),
        })
        print(json.dumps(rows[-1]))
    big = []
    for name, mu, sigma in extreme_sets_of_1000():
        p = rank_probabilities(mu, sigma, K, ranks=False).top
        r = rank_probabilities(mu, sigma, K)
        big.append({"set": name, "n": len(mu), "nan": int(np.isnan(p).sum() + np.isnan(r.rank).sum()),
                    "min_p": float(p.min()), "min_rank": float(r.rank.min()), "max_p": float(p.max()),
                    "sum_p_minus_k": float(abs(p.sum() - K))})
        print(json.dumps(big[-1]))
    quad = {}
    for name, (mu, sigma) in rating_sets().items():
        if len(mu) <= 50:  # Eq. 1 by adaptive quadrature, all documents (slow)
            top = rank_probabilities(mu, sigma, K, ranks=False).top
            want = np.array([eq1_by_adaptive_quadrature(mu, sigma, K, i) for i in range(len(mu))]) if len(mu) > K \
                else np.ones(len(mu))
            quad[name] = float(np.abs(top - want).max())
    print("against adaptive quadrature:", json.dumps(quad))
    return {"draws": 10**6, "sets": rows, "n1000": big, "max_err_vs_quadrature": quad,
            "max_err_p": max(r["max_err_p"] for r in rows), "max_err_rank": max(r["max_err_rank"] for r in rows),
            "max_sum_p_minus_k": max(r["sum_p_minus_k"] for r in rows + big)}


def dl19_iteration_ratings(limit: int = 400) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (mu, sigma) every adaptive AcuRank iteration saw on DL19 (simulated reranker, noise 1, seed 0)."""
    from acurank_cli.run.driver import Driver
    from acurank_cli.run.inputs import InputSpec
    from acurank_cli.records import Phase
    from acurank_cli.rerankers.backend import build_reranker
    from acurank_cli.method.registry import build_strategy

    inputs = InputSpec(run=str(ROOT / "sample_runs/dl19/bm25.run"), depth=100,
                       qrels=str(ROOT / "sample_runs/dl19/qrels.txt")).load(False)
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def on_step(task, step):
        if step.phase is Phase.adaptive and step.snapshot is not None and len(seen) < limit:
            snap = step.snapshot()
            seen.append((np.array([d.mu for d in snap.docs]), np.array([d.sigma for d in snap.docs])))

    reranker = build_reranker("simulated", qrels=inputs.qrels)
    list(Driver(build_strategy("acurank"), reranker, on_step=on_step).run(inputs.tasks))
    return seen


def _timings_ms(fn, sets, repeat: int) -> dict:
    """Per call over every set, ``repeat`` times: the median of the per-repeat medians, and the min/max."""
    for mu, sigma in sets[:3]:
        fn(mu, sigma)  # warm up
    medians = []
    for _ in range(repeat):
        times = []
        for mu, sigma in sets:
            t = time.perf_counter()
            fn(mu, sigma)
            times.append(time.perf_counter() - t)
        medians.append(statistics.median(times) * 1e3)
    return {"median": statistics.median(medians), "min": min(medians), "max": max(medians)}


def cmd_speed(args) -> dict:
    from acurank_cli.io.runs import read_run
    from acurank_cli.method.trueskill import initial_ratings
    from acurank_cli.method.acurank_params import Uncertainty
    from acurank_cli.method.uncertainty import assess

    sets100 = dl19_iteration_ratings()
    first = read_run(ROOT / "sample_runs/dl19/bm25.run", depth=100)
    initial100 = [initial_ratings([c.score for c in cands], "score", "speed") for cands in first.values()]
    run = read_run(args.scifact_run, depth=1000)
    top1000 = [c for c in run.values() if len(c) >= 1000][:20]
    sets1000 = []
    rng = np.random.default_rng(0)
    for cands in top1000:
        mu, sigma = initial_ratings([c.score for c in cands], "score", "speed")
        sets1000.append((mu, sigma))
        sets1000.append((mu + rng.normal(0, 1.0, len(mu)), np.minimum(sigma, rng.uniform(0.8, 3.0, len(mu)))))
    out = {"n100_sets": len(sets100), "n1000_sets": len(sets1000), "rules": {}}
    for rule in Uncertainty:
        fn = lambda mu, sigma, rule=rule: assess(rule, mu, sigma, K, 0.01)  # noqa: E731
        out["rules"][rule.value] = {"n100_ms": _timings_ms(fn, sets100, 5),
                                    "n100_initial_ms": _timings_ms(fn, initial100, 5),
                                    "n1000_ms": _timings_ms(fn, sets1000, 5)}
        print(rule.value, json.dumps(out["rules"][rule.value]))
    return out


def _rerank(job: tuple[str, str, str, int, Path, Path]) -> tuple[str, float]:
    dataset, method, rule, seed, run, out = job
    folder = out / f"seed{seed}" / dataset
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{method}.{rule}.run"  # an existing run resumes (or is already complete)
    qrels = run.parent / "qrels.txt"
    t = time.perf_counter()
    subprocess.run([str(ROOT / ".venv/bin/acurank"), "rerank", str(run), "--method", method, "--reranker", "simulated",
                    "--qrels", str(qrels), "--sim-noise", "1.0", "--sim-seed", str(seed), "--uncertainty", rule,
                    "--quiet", "--output", str(target)], check=True, capture_output=True)
    return str(target), time.perf_counter() - t


def cmd_study(args) -> dict:
    from acurank_cli.evaluation import evaluate
    from acurank_cli.io.run_files import read_stats, stats_path_for
    from acurank_cli.io.collection_files import read_qrels
    from acurank_cli.io.runs import read_run
    from acurank_cli.report.pareto import Point, pareto_frontier, plot_pareto
    from acurank_cli.report.significance import paired_ttest, permutation_test

    out = Path(args.out)
    runs = {"DL19": ROOT / "sample_runs/dl19/bm25.run", "DL20": ROOT / "sample_runs/dl20/bm25.run",
            "DL23": ROOT / "sample_runs/dl23/bm25.run", "SciFact": Path(args.scifact_run)}
    for name, run in runs.items():  # the qrels beside each run, as report's --runs layout wants
        qrels = run.parent / "qrels.txt"
        if not qrels.exists():
            raise SystemExit(f"{qrels} missing (copy the dataset's qrels beside its run)")
    jobs = [(ds, m, r, s, runs[ds], out) for s in SEEDS for ds in runs for m in METHODS for r in RULES]
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        for i, (path, secs) in enumerate(pool.map(_rerank, jobs), 1):
            print(f"[{i}/{len(jobs)}] {path} {secs:.1f}s", flush=True)
    wall = time.perf_counter() - started
    for s in SEEDS:  # the first-stage run and qrels beside the reranked runs, for acurank report
        for ds, run in runs.items():
            for f in (run, run.parent / "qrels.txt"):
                (out / f"seed{s}" / ds / f.name).write_bytes(f.read_bytes())

    table, points = [], {ds: [] for ds in runs}
    for ds, run in runs.items():
        qrels = read_qrels(run.parent / "qrels.txt")
        for method in METHODS:
            per_rule = {}
            for rule in RULES:
                per_seed, calls, engine = [], [], []
                for s in SEEDS:
                    path = out / f"seed{s}" / ds / f"{method}.{rule}.run"
                    scored = read_run(path).scores()
                    per_seed.append(evaluate(scored, qrels).per_query)
                    stats = read_stats(stats_path_for(path))
                    calls.append(statistics.fmean(r["calls"] for r in stats.values()))
                    engine.append(statistics.fmean(r["seconds"] - r["rerank_seconds"] for r in stats.values()))
                qids = sorted(per_seed[0])
                mean_q = [statistics.fmean(ps[q]["ndcg_cut_10"] for ps in per_seed) for q in qids]
                per_rule[rule] = (qids, mean_q)
                row = {"dataset": ds, "method": method, "rule": rule,
                       "ndcg10": statistics.fmean(mean_q), "ndcg10_by_seed": [statistics.fmean(
                           v["ndcg_cut_10"] for v in ps.values()) for ps in per_seed],
                       "calls": statistics.fmean(calls), "calls_by_seed": calls,
                       "engine_seconds_per_query": statistics.fmean(engine)}
                if rule != "threshold":
                    base = per_rule["threshold"][1]
                    row["delta_ndcg10"] = row["ndcg10"] - statistics.fmean(base)
                    row["ttest_p"] = paired_ttest(mean_q, base).pvalue
                    row["permutation_p"] = permutation_test(mean_q, base, resamples=10000, seed=0).pvalue
                table.append(row)
                points[ds].append(Point(f"{method} {rule}", row["calls"], row["ndcg10"]))
                print(json.dumps(row), flush=True)
    views = []
    for ds, pts in points.items():
        flags = pareto_frontier([(p.x, p.y) for p in pts])
        views.append((f"{ds} (simulated, mean of 3 seeds)",
                      [Point(p.method, p.x, p.y, f) for p, f in zip(pts, flags)]))
    plot_pareto(views, [ROOT / "docs/uncertainty-pareto.png"])
    return {"wall_seconds": wall, "jobs": args.jobs, "rows": table}


def cmd_table(args) -> None:
    """Markdown tables from results/uncertainty_study.json (means over seeds; p against threshold)."""
    rows = json.loads((RESULTS / "uncertainty_study.json").read_text())["rows"]
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    print("| method | rule | " + " | ".join(f"{d} nDCG@10 | {d} calls" for d in datasets) + " |")
    print("|---|---|" + "---:|---:|" * len(datasets))
    for method in METHODS:
        for rule in RULES:
            cells = []
            for d in datasets:
                r = next(x for x in rows if x["dataset"] == d and x["method"] == method and x["rule"] == rule)
                mark = ""
                if rule != "threshold":
                    mark = "‡" if r["ttest_p"] < 0.01 else ("†" if r["ttest_p"] < 0.05 else "")
                cells.append(f"{r['ndcg10']:.4f}{mark} | {r['calls']:.2f}")
            print(f"| {method} | {rule} | " + " | ".join(cells) + " |")
    print()
    print("| dataset | method | rule | nDCG@10 by seed | delta nDCG@10 | t-test p | permutation p | calls by seed |"
          " engine s/query |")
    print("|---|---|---|---|---:|---:|---:|---|---:|")
    for r in rows:
        seeds = " / ".join(f"{v:.4f}" for v in r["ndcg10_by_seed"])
        calls = " / ".join(f"{v:.2f}" for v in r["calls_by_seed"])
        delta = f"{r['delta_ndcg10']:+.4f}" if "delta_ndcg10" in r else ""
        tp = f"{r['ttest_p']:.3g}" if "ttest_p" in r else ""
        pp = f"{r['permutation_p']:.3g}" if "permutation_p" in r else ""
        print(f"| {r['dataset']} | {r['method']} | {r['rule']} | {seeds} | {delta} | {tp} | {pp} | {calls} | "
              f"{r['engine_seconds_per_query']:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("accuracy", "speed", "study", "table"))
    parser.add_argument("--scifact-run", default="out/uncertainty/scifact/bm25.run")
    parser.add_argument("--out", default="out/uncertainty")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if args.what == "table":
        return cmd_table(args)
    result = {"accuracy": cmd_accuracy, "speed": cmd_speed, "study": cmd_study}[args.what](args)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"uncertainty_{args.what}.json"
    path.write_text(json.dumps({"machine": machine(), **result}, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
