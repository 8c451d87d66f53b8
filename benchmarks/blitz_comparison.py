"""BlitzRank vs AcuRank vs the baselines behind one reranker, one prompt and one accounting (issue 22).

    python benchmarks/blitz_comparison.py OUT [--noise 0 0.5 1.0] [--seeds 0 1 2] [--no-minilm] [--jobs 2]

Every run is an ``acurank rerank``/``baseline`` command line (so every call is counted by the driver):
OUT/<setting>/<dataset>/<label>.run + .stats.jsonl, settings ``sim-n<noise>-s<seed>`` (the simulated
reranker, with ``--sim-tokens gpt-4o``: each call's input tokens are those of the published prompt for its
window; not on SciFact, whose long abstracts make the prompt fitting cost about 0.1 s a call) and ``minilm`` (the offline bi-encoder; its tokens are encoder tokens, not prompt tokens). Datasets:
the sample DL19, DL20, DL23 BM25 top-100 and SciFact (BM25 top-100 from ``acurank index``/``retrieve``
over the bundled corpus, made once in OUT/scifact). Runs that exist are kept (delete OUT to redo).

Writes OUT/comparison.md (one table per setting: nDCG@10 per dataset with paired t-test marks against
sw-1, computed on the per-query nDCG@10 averaged over the seeds; the macro average; calls, rounds and input
tokens per query, macro-averaged; tokens over the datasets that have them), OUT/comparison.json and OUT/pareto.png (macro nDCG@10 against calls per
query, one panel per setting, the Pareto frontier drawn).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.evaluation import evaluate  # noqa: E402
from acurank_cli.io.outputs import read_stats  # noqa: E402
from acurank_cli.io.readers import read_qrels, read_run  # noqa: E402
from acurank_cli.report.pareto import pareto_frontier  # noqa: E402
from acurank_cli.report.significance import mark, paired_ttest  # noqa: E402

ACURANK = [sys.executable, "-m", "acurank_cli"]
SAMPLE = ROOT / "sample_runs"
DATASETS = ("dl19", "dl20", "dl23", "scifact")
#: (row label, command, method, extra flags)
METHODS = (
    ("sw-1", "baseline", "sw-1", ()),
    ("sw-2", "baseline", "sw-2", ()),
    ("tourrank-1", "baseline", "tourrank-1", ()),
    ("blitz-k20", "baseline", "blitz-k20", ()),
    ("blitz-k10", "baseline", "blitz-k10", ()),
    ("acurank-9", "rerank", "acurank-9", ()),
    ("acurank-set-9x", "rerank", "acurank", ("--budget-total", "9x")),
    ("acurank", "rerank", "acurank", ()),
    ("acurank-H", "rerank", "acurank-H", ()),
    ("acurank-uniform", "rerank", "acurank", ("--init", "uniform")),
)
ACURANK_ROWS = ("acurank-9", "acurank-set-9x", "acurank", "acurank-H", "acurank-uniform")


def dataset_files(out: Path, ds: str) -> dict[str, Path]:
    """run, qrels, topics and texts of a dataset (SciFact's BM25 run is made once)."""
    if ds != "scifact":
        d = SAMPLE / ds
        return {"run": d / "bm25.run", "qrels": d / "qrels.txt", "topics": d / "topics.tsv",
                "corpus": d / "passages.jsonl.gz"}
    d = SAMPLE / "scifact"
    work = out / "scifact"
    files = {"run": work / "bm25.run", "qrels": d / "qrels.beir-v1.0.0-scifact.test.txt",
             "topics": d / "topics.beir-v1.0.0-scifact.test.tsv.gz", "corpus": d / "corpus.jsonl.gz"}
    if not files["run"].exists():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run([*ACURANK, "index", "--input", str(files["corpus"]), "--index", str(work / "index")], check=True)
        subprocess.run([*ACURANK, "retrieve", "--index", str(work / "index"), "--topics", str(files["topics"]),
                        "--hits", "100", "--output", str(files["run"])], check=True)
    return files


def run_one(out: Path, setting: str, ds: str, files: dict[str, Path], row: tuple, reranker: list[str]) -> None:
    label, command, method, extra = row
    folder = out / setting / ds
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{label}.run"
    if target.exists() and (folder / f"{label}.stats.jsonl").exists():
        return
    if ds == "scifact" and "--sim-tokens" in reranker:  # SciFact's long abstracts make every prompt fitting
        cut = reranker.index("--sim-tokens")          # take ~18 counts (about 0.1 s a call): no tokens there
        reranker = reranker[:cut] + reranker[cut + 2:]
    cmd = [*ACURANK, command, str(files["run"]), "--method", method, *extra, *reranker, "--qrels", str(files["qrels"]),
           "--topics", str(files["topics"]), "--corpus", str(files["corpus"]), "--quiet", "--overwrite",
           "--output", str(target), "--tag", label]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "ACURANK_CACHE": str(out / "cache" / "calls.sqlite")})
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    summary = proc.stderr.strip().splitlines()[-1]
    print(f"{setting} {ds} {label}: {summary.split(': ', 2)[-1][:150]}", flush=True)


def collect(out: Path, settings: list[str], datasets: list[str]) -> dict:
    """{setting group: {dataset: {label: {"ndcg": {qid: mean over seeds}, "calls", "rounds", "tokens"}}}}."""
    groups: dict[str, list[str]] = {}
    for s in settings:
        groups.setdefault(s.rsplit("-s", 1)[0] if s.startswith("sim-") else s, []).append(s)
    result: dict = {}
    for group, members in groups.items():
        result[group] = {}
        for ds in datasets:
            files = dataset_files(out, ds)
            qrels = read_qrels(files["qrels"])
            rows: dict = {}
            bm25 = evaluate(read_run(files["run"]).scores(), qrels).per_query
            rows["bm25"] = {"ndcg": {q: v["ndcg_cut_10"] for q, v in bm25.items()}, "calls": 0.0, "rounds": 0.0,
                            "tokens": 0.0}
            for label, *_ in METHODS:
                per_seed, calls, rounds, tokens = [], [], [], []
                for s in members:
                    path = out / s / ds / f"{label}.run"
                    per_seed.append(evaluate(read_run(path).scores(), qrels).per_query)
                    stats = read_stats(out / s / ds / f"{label}.stats.jsonl").values()
                    calls.append(statistics.mean(r.calls for r in stats))
                    rounds.append(statistics.mean(r.rounds or 0 for r in stats))
                    tokens.append(statistics.mean(r.input_tokens or 0 for r in stats))
                qids = per_seed[0].keys()
                rows[label] = {"ndcg": {q: statistics.mean(p[q]["ndcg_cut_10"] for p in per_seed) for q in qids},
                               "calls": statistics.mean(calls), "rounds": statistics.mean(rounds),
                               "tokens": statistics.mean(tokens), "seeds": len(members)}
            result[group][ds] = rows
    return result


def summarise(result: dict, datasets: list[str]) -> tuple[str, dict]:
    lines, summary = [], {}
    for group, by_ds in result.items():
        labels = ["bm25", *[m[0] for m in METHODS]]
        seeds = max(r.get("seeds", 1) for r in by_ds[datasets[0]].values())
        title = (f"simulated reranker, noise {group[5:]}, mean over {seeds} seeds" if group.startswith("sim-")
                 else "minilm (all-MiniLM-L6-v2, offline)")
        lines += [f"### {title}", "",
                  "| method | " + " | ".join(datasets) + " | macro nDCG@10 | calls/q | rounds/q | input tokens/q (DL) |",
                  "|---|" + "---|" * (len(datasets) + 4)]
        summary[group] = {}
        for label in labels:
            cells, ndcgs = [], []
            for ds in datasets:
                row, base = by_ds[ds][label], by_ds[ds]["sw-1"]
                mean = statistics.mean(row["ndcg"].values())
                ndcgs.append(mean)
                test = paired_ttest([row["ndcg"][q] for q in base["ndcg"]], [base["ndcg"][q] for q in base["ndcg"]])
                sign = "" if label == "sw-1" else ("+" if mean > statistics.mean(base["ndcg"].values()) else "-")
                cells.append(f"{mean:.4f}{mark(test.pvalue) and sign + mark(test.pvalue)}")
            macro = statistics.mean(ndcgs)
            calls = statistics.mean(by_ds[ds][label]["calls"] for ds in datasets)
            rounds = statistics.mean(by_ds[ds][label]["rounds"] for ds in datasets)
            counted = [ds for ds in datasets if by_ds[ds]["sw-1"]["tokens"]] or datasets
            tokens = statistics.mean(by_ds[ds][label]["tokens"] for ds in counted)
            summary[group][label] = {"macro_ndcg10": macro, "calls": calls, "rounds": rounds, "input_tokens": tokens,
                                     "ndcg10": dict(zip(datasets, ndcgs))}
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {macro:.4f} | {calls:.2f} | {rounds:.2f} | {tokens:,.0f} |")
        lines.append("")
        lines.append(dominance(summary[group]))
        lines.append("")
    return "\n".join(lines), summary


def dominance(rows: dict) -> str:
    """Per AcuRank row: the methods that dominate it (no more calls, no lower macro nDCG@10, one strictly)."""
    parts = []
    for label in ACURANK_ROWS:
        a = rows[label]
        by = [o for o, b in rows.items() if o != label and b["calls"] <= a["calls"] and b["macro_ndcg10"] >= a["macro_ndcg10"]
              and (b["calls"] < a["calls"] or b["macro_ndcg10"] > a["macro_ndcg10"])]
        parts.append(f"{label} is {'dominated by ' + ', '.join(by) if by else 'not dominated'}")
    return "Dominance (macro nDCG@10 vs calls/query): " + "; ".join(parts) + "."


def plot(summary: dict, path: Path) -> None:
    """One panel per setting, drawn by acurank's own Pareto plot (frontier, label placement)."""
    from acurank_cli.report.pareto import Point, plot_pareto

    views = []
    for group, rows in summary.items():
        pts = [(label, r["calls"], r["macro_ndcg10"]) for label, r in rows.items()]
        front = pareto_frontier([(x, y) for _, x, y in pts])
        title = f"simulated reranker, noise {group[5:]} (3 seeds)" if group.startswith("sim-") else "minilm"
        views.append((title, [Point(label, x, y, on) for (label, x, y), on in zip(pts, front)]))
    plot_pareto(views, [path], "calls", "macro nDCG@10 (DL19, DL20, DL23, SciFact)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--no-minilm", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    out = args.out
    files = {ds: dataset_files(out, ds) for ds in args.datasets}
    settings = [(f"sim-n{n:g}-s{s}", ["--reranker", "simulated", "--sim-noise", str(n), "--sim-seed", str(s),
                                       "--sim-tokens", "gpt-4o"]) for n in args.noise for s in args.seeds]
    if not args.no_minilm:
        settings.append(("minilm", ["--reranker", "minilm"]))
    jobs = [(name, ds, row, rr) for name, rr in settings for ds in args.datasets for row in METHODS]
    # minilm's first run per dataset fills the embedding store; the rest read it: run minilm serially
    sim = [j for j in jobs if j[0] != "minilm"]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda j: run_one(out, j[0], j[1], files[j[1]], j[2], j[3]), sim))
    for j in jobs:
        if j[0] == "minilm":
            run_one(out, j[0], j[1], files[j[1]], j[2], j[3])
    result = collect(out, [s for s, _ in settings], args.datasets)
    text, summary = summarise(result, args.datasets)
    (out / "comparison.md").write_text(text)
    (out / "comparison.json").write_text(json.dumps(summary, indent=1))
    plot(summary, out / "pareto.png")
    print(text)


if __name__ == "__main__":
    main()
