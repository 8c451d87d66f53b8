"""Every method behind one reranker and one accounting, over rerankers from consistent to noisy and biased:
which method to use for which reranker.

    python benchmarks/method_comparison.py OUT [--settings NAME ...] [--seeds 0 1 2] [--no-minilm] [--jobs 2]
                                               [--rows LABEL ...]

Every run is an ``acurank rerank``/``baseline`` command line (so every call is counted by the driver):
OUT/<setting>-s<seed>/<dataset>/<label>.run + .stats.jsonl. Settings (:data:`SETTINGS`): the simulated
reranker at noise 0, 0.25, 0.5, 1.0 (fresh noise per window, the specified oracle) and three LLM-like ones:
``persistent`` (noise 0.1 and an error per query and document, sd 0.35, the same in every window: consistent
but persistently wrong), ``position`` (noise 0.25 and a primacy bias of one grade from the first presented
document to the last), ``llm`` (noise 0.3, persistent 0.35, primacy 1); and ``minilm`` (the offline
bi-encoder, one run). Datasets: the sample DL19, DL20, DL23 BM25 top-100 and SciFact (BM25 top-100 from
``acurank index``/``retrieve`` over the bundled corpus, made once in OUT/scifact). Runs that exist are kept
(delete OUT to redo).

Writes OUT/comparison.md: per setting, nDCG@10 per dataset (per-query values averaged over the seeds), the
macro average, calls and rounds per query; then, per setting, acurank-auto-9 against each rival (sw-1,
blitz-k20, acurank-9) and acurank-auto against acurank: the macro difference with a stratified paired test
(per dataset the mean and variance of the per-query differences; the macro difference is their average,
its variance sum_d var_d / (16 n_d); two-sided normal p), and the per-dataset paired t-test p-values.
Also OUT/comparison.json and OUT/pareto.png (macro nDCG@10 against calls, one panel per setting).
``--rows`` runs and reports only some of the rows (:data:`METHODS` labels; those of :data:`PAIRS` always).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.evaluation import evaluate  # noqa: E402
from acurank_cli.io.run_files import read_stats  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402
from acurank_cli.report.pareto import pareto_frontier  # noqa: E402
from acurank_cli.report.significance import paired_ttest  # noqa: E402

ACURANK = [sys.executable, "-m", "acurank_cli"]
SAMPLE = ROOT / "sample_runs"
DATASETS = ("dl19", "dl20", "dl23", "scifact")
#: (row label, command, method, extra flags)
METHODS = (
    ("sw-1", "baseline", "sw-1", ()),
    ("sw-2", "baseline", "sw-2", ()),
    ("blitz-k20", "baseline", "blitz-k20", ()),
    ("blitz-k10", "baseline", "blitz-k10", ()),
    ("acurank-9", "rerank", "acurank-9", ()),
    ("acurank", "rerank", "acurank", ()),
    ("acurank --budget 30", "rerank", "acurank", ("--budget", "30")),
    ("acurank --budget-total 9x", "rerank", "acurank", ("--budget-total", "9x")),
    ("acurank-auto-9", "rerank", "acurank-auto-9", ()),
    ("acurank-auto", "rerank", "acurank-auto", ()),
)
#: setting -> the simulated reranker's flags (None: minilm)
SETTINGS = {
    "noise 0": ("--sim-noise", "0"),
    "noise 0.25": ("--sim-noise", "0.25"),
    "noise 0.5": ("--sim-noise", "0.5"),
    "noise 1": ("--sim-noise", "1"),
    "persistent": ("--sim-noise", "0.1", "--sim-persistent", "0.35"),
    "position": ("--sim-noise", "0.25", "--sim-position", "1"),
    "llm": ("--sim-noise", "0.3", "--sim-persistent", "0.35", "--sim-position", "1"),
}
#: (challenger, rival) pairs tested in every setting
PAIRS = (("acurank-auto-9", "sw-1"), ("acurank-auto-9", "blitz-k20"), ("acurank-auto-9", "acurank-9"),
         ("acurank-auto", "acurank"))


def label_file(label: str) -> str:
    return label.replace(" --", ".").replace(" ", "")


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


def folder(out: Path, setting: str, seed: int | None) -> Path:
    name = setting.replace(" ", "-")
    return out / (name if seed is None else f"{name}-s{seed}")


def finished(run: Path) -> bool:
    """The run and its stats exist and the stats hold every query of the run's inputs (a killed run does not)."""
    meta, stats = Path(f"{run}.meta.json"), run.with_suffix(".stats.jsonl")
    if not (run.exists() and meta.exists() and stats.exists()):
        return False
    queries = json.loads(meta.read_text())["fingerprint"]["inputs"]["queries"]
    return len(stats.read_text().splitlines()) == queries


def run_one(out: Path, setting: str, seed: int | None, ds: str, files: dict[str, Path], row: tuple) -> None:
    label, command, method, extra = row
    where = folder(out, setting, seed) / ds
    where.mkdir(parents=True, exist_ok=True)
    target = where / f"{label_file(label)}.run"
    if finished(target):
        return
    if setting == "minilm":
        reranker = ["--reranker", "minilm"]
    else:
        reranker = ["--reranker", "simulated", *SETTINGS[setting], "--sim-seed", str(seed)]
    cmd = [*ACURANK, command, str(files["run"]), "--method", method, *extra, *reranker, "--qrels", str(files["qrels"]),
           "--topics", str(files["topics"]), "--corpus", str(files["corpus"]), "--quiet", "--overwrite",
           "--output", str(target), "--tag", label_file(label)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "ACURANK_CACHE": str(out / "cache" / "calls.sqlite")})
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    said = proc.stderr.strip().splitlines()  # --quiet: warnings only
    print(f"{setting} s{seed} {ds} {label}: done" + (f" ({said[-1][:140]})" if said else ""), flush=True)


def collect(out: Path, settings: list[str], seeds: list[int], datasets: list[str], methods=METHODS) -> dict:
    """{setting: {dataset: {label: {"ndcg": {qid: mean over seeds}, "calls", "rounds"}}}}."""
    result: dict = {}
    for setting in settings:
        runs = [None] if setting == "minilm" else seeds
        result[setting] = {}
        for ds in datasets:
            files = dataset_files(out, ds)
            qrels = read_qrels(files["qrels"])
            bm25 = evaluate(read_run(files["run"]).scores(), qrels).per_query
            rows: dict = {"BM25": {"ndcg": {q: v["ndcg_cut_10"] for q, v in bm25.items()}, "calls": 0.0, "rounds": 0.0}}
            for label, *_ in methods:
                per_seed, calls, rounds = [], [], []
                for seed in runs:
                    base = folder(out, setting, seed) / ds / label_file(label)  # (labels hold dots: no with_suffix)
                    per_seed.append(evaluate(read_run(Path(f"{base}.run")).scores(), qrels).per_query)
                    stats = read_stats(Path(f"{base}.stats.jsonl")).values()
                    calls.append(statistics.mean(r.calls for r in stats))
                    rounds.append(statistics.mean(r.rounds or 0 for r in stats))
                qids = per_seed[0].keys()
                rows[label] = {"ndcg": {q: statistics.mean(p[q]["ndcg_cut_10"] for p in per_seed) for q in qids},
                               "calls": statistics.mean(calls), "rounds": statistics.mean(rounds)}
            result[setting][ds] = rows
    return result


def macro_test(by_ds: dict, a: str, b: str) -> dict:
    """The macro difference of a against b (the average over datasets of the per-query mean differences) with a
    stratified test (variance sum_d var_d / (D^2 n_d), two-sided normal p), and per-dataset paired t p-values."""
    means, variances, per_ds = [], [], {}
    for ds, rows in by_ds.items():
        qids = list(rows[b]["ndcg"])
        d = [rows[a]["ndcg"][q] - rows[b]["ndcg"][q] for q in qids]
        means.append(statistics.mean(d))
        variances.append(statistics.variance(d) / len(d) if len(d) > 1 else 0.0)
        per_ds[ds] = paired_ttest([rows[a]["ndcg"][q] for q in qids], [rows[b]["ndcg"][q] for q in qids]).pvalue
    k = len(means)
    diff = sum(means) / k
    se = math.sqrt(sum(variances)) / k
    p = 1.0 if se == 0 and diff == 0 else (0.0 if se == 0 else math.erfc(abs(diff) / se / math.sqrt(2)))
    return {"diff": diff, "se": se, "p": p, "per_dataset_p": per_ds}


def summarise(result: dict, datasets: list[str]) -> tuple[str, dict]:
    lines, summary = [], {}
    for setting, by_ds in result.items():
        labels = list(next(iter(by_ds.values())))  # BM25, then the rows collected
        title = "minilm (all-MiniLM-L6-v2, offline)" if setting == "minilm" else f"simulated reranker, {setting}"
        lines += [f"### {title}", "", "| method | " + " | ".join(datasets) + " | macro nDCG@10 | calls/q | rounds/q |",
                  "|---|" + "---|" * (len(datasets) + 3)]
        summary[setting] = {"rows": {}, "tests": {}}
        for label in labels:
            ndcgs = [statistics.mean(by_ds[ds][label]["ndcg"].values()) for ds in datasets]
            calls = statistics.mean(by_ds[ds][label]["calls"] for ds in datasets)
            rounds = statistics.mean(by_ds[ds][label]["rounds"] for ds in datasets)
            macro = statistics.mean(ndcgs)
            summary[setting]["rows"][label] = {"macro_ndcg10": macro, "calls": calls, "rounds": rounds,
                                               "ndcg10": dict(zip(datasets, ndcgs))}
            lines.append(f"| {label} | " + " | ".join(f"{x:.4f}" for x in ndcgs) + f" | {macro:.4f} | {calls:.2f} | {rounds:.2f} |")
        lines += ["", "| comparison | macro difference | p (stratified) | p per dataset (paired t) |", "|---|---|---|---|"]
        for a, b in PAIRS:
            t = macro_test(by_ds, a, b)
            summary[setting]["tests"][f"{a} vs {b}"] = t
            per = ", ".join(f"{ds} {t['per_dataset_p'][ds]:.2g}" for ds in datasets)
            lines.append(f"| {a} vs {b} | {t['diff']:+.4f} | {t['p']:.2g} | {per} |")
        lines += ["", verdict(summary[setting]["rows"]), ""]
    return "\n".join(lines), summary


def verdict(rows: dict) -> str:
    """The acceptance reading: acurank-auto-9 against the best of sw-1, blitz-k20 and acurank-9 (less 0.005,
    at no more than 9 calls), and acurank-auto against acurank (at least its nDCG@10 at fewer calls)."""
    best = max(("sw-1", "blitz-k20", "acurank-9"), key=lambda r: rows[r]["macro_ndcg10"])
    a9, a, base = rows["acurank-auto-9"], rows["acurank-auto"], rows["acurank"]
    margin = a9["macro_ndcg10"] - rows[best]["macro_ndcg10"]
    ok9 = margin >= -0.005 and a9["calls"] <= 9
    ok = a["macro_ndcg10"] >= base["macro_ndcg10"] and a["calls"] < base["calls"]
    return (f"acurank-auto-9 {a9['macro_ndcg10']:.4f} at {a9['calls']:.2f} calls vs the best 9-call rival {best} "
            f"{rows[best]['macro_ndcg10']:.4f}: {margin:+.4f} ({'holds' if ok9 else 'falls short'}); acurank-auto "
            f"{a['macro_ndcg10']:.4f} at {a['calls']:.2f} calls vs acurank {base['macro_ndcg10']:.4f} at "
            f"{base['calls']:.2f} ({'holds' if ok else 'falls short'}).")


def plot(summary: dict, path: Path) -> None:
    """One panel per setting, drawn by acurank's own Pareto plot (frontier, label placement)."""
    from acurank_cli.report.pareto import Point, plot_pareto

    views = []
    for setting, s in summary.items():
        pts = [(label, r["calls"], r["macro_ndcg10"]) for label, r in s["rows"].items()]
        front = pareto_frontier([(x, y) for _, x, y in pts])
        views.append((setting, [Point(label, x, y, on) for (label, x, y), on in zip(pts, front)]))
    plot_pareto(views, [path], "calls", "macro nDCG@10 (DL19, DL20, DL23, SciFact)", log_x=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--no-minilm", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rows", nargs="+", metavar="LABEL", choices=[m[0] for m in METHODS],
                    help="only these rows of METHODS (and those of PAIRS, always)")
    args = ap.parse_args()
    out = args.out
    wanted = {label for pair in PAIRS for label in pair} | set(args.rows or (m[0] for m in METHODS))
    methods = [m for m in METHODS if m[0] in wanted]
    files = {ds: dataset_files(out, ds) for ds in args.datasets}
    sim = [(s, seed, ds, row) for s in args.settings for seed in args.seeds for ds in args.datasets for row in methods]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda j: run_one(out, j[0], j[1], j[2], files[j[2]], j[3]), sim))
    settings = list(args.settings)
    if not args.no_minilm:  # the first minilm run per dataset fills the embedding store; the rest read it: serially
        for ds in args.datasets:
            for row in methods:
                run_one(out, "minilm", None, ds, files[ds], row)
        settings.append("minilm")
    result = collect(out, settings, args.seeds, args.datasets, methods)
    text, summary = summarise(result, args.datasets)
    (out / "comparison.md").write_text(text)
    (out / "comparison.json").write_text(json.dumps(summary, indent=1))
    plot(summary, out / "pareto.png")
    print(text)


if __name__ == "__main__":
    main()
