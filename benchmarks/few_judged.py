"""How many judged queries a calibration map needs (issue 83, item 2): maps fit on N = 5, 10, 20 and 40 judged
queries of a collection, each N drawn at random 20 times, measured on the collection's other queries.

    PYTHONPATH=. python benchmarks/few_judged.py [--settings minilm minilm-abs sim1 sim2]
        [--datasets dl19 dl20 scifact] [--draws 20] [--work DIR] [--out NAME]

Per reranker setting (MiniLM; the simulated reranker at noise 1 and 2) and collection (TREC DL19 and DL20, grade >= 2
relevant, as BENCHMARKS.md section 25; SciFact's 300 test queries over their BM25 top 100, grade >= 1), the collection
is reranked once with ``acurank rerank --method acurank`` as a user runs it, with ``--calibrate``: every query's
map features (the final ratings' logit p_topk, z(mu) and log rank, in the returned order) land in its stats. A map is
then fit on N drawn queries by the CLI's own fit (:func:`acurank_cli.relevance.fit`) and applied to every other
query as the CLI applies it (:meth:`CalibrationMap.of_matrix`, then :func:`relevance.monotone` down the order).
Measured on those held-out queries: the expected calibration error (10 equal-width bins) and Brier score of
P(relevant) over their documents, the mean F1 of the expected-F1 cut (:func:`relevance.expected_f1_cut`) over the
oracle cut's, and the ROC AUC of P(none) between the held-out queries' lists with every relevant document removed
and their intact lists that hold one (the protocol of section 25). The removed lists are reranked once too; their
run is given a made-up qrels file (each list's first document "relevant") only so that ``--calibrate`` records their
features: features do not read labels, and that run's own map is thrown away.

A draw whose N queries hold no relevant document (or no other) cannot be fit, as ``acurank rerank --calibrate``
refuses it; such draws are counted, not measured. Figures are means over the draws with their standard errors
(standard deviation over draws / sqrt(draws)).

Beside each N, ``ece_fit_on_all``: the ECE on the same draws' test queries of a map fit on every judged query, the
test queries among them: no fit from N queries does better by much, so it says what the test queries' own sampling
leaves (a collection whose queries differ in their share of relevant candidates has a high floor).

Results: benchmarks/results/few_judged.json, and the tables printed (BENCHMARKS.md section 29).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from acurank_cli import relevance as rel  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.run_files import read_stats  # noqa: E402

from common import save  # noqa: E402
from method_comparison import dataset_files  # noqa: E402

SETTINGS = {"minilm": ["--reranker", "minilm"],
            #: MiniLM with its own score of each document as a fourth feature (``--absolute``, issue 83 item 4)
            "minilm-abs": ["--reranker", "minilm", "--absolute"],
            "sim1": ["--reranker", "simulated", "--sim-noise", "1"],
            "sim2": ["--reranker", "simulated", "--sim-noise", "2"]}
GRADES = {"dl19": 2, "dl20": 2, "scifact": 1}
SIZES = (5, 10, 20, 40)
TARGET_ECE = 0.05


def _blocks(run: Path) -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    for line in run.read_text().splitlines():
        if line.strip():
            blocks.setdefault(line.split()[0], []).append(line)
    return blocks


def removed_lists(files: dict[str, Path], grade: int, work: Path, ds: str) -> tuple[Path, Path]:
    """The run with every relevant candidate removed, and the made-up qrels that let ``--calibrate`` record its
    features (each list's first remaining document marked 1; the labels are never read back)."""
    qrels = read_qrels(files["qrels"])
    kept, marks = [], []
    for q, block in _blocks(files["run"]).items():
        rest = [ln for ln in block if qrels.get(q, {}).get(ln.split()[2], 0) < grade]
        if not rest:
            continue
        kept += rest
        marks.append(f"{q} 0 {rest[0].split()[2]} 1")
        marks += [f"{q} 0 {ln.split()[2]} 0" for ln in rest[1:2]]  # one "other" document: the fit needs both
    run, marked = work / f"{ds}.removed.run", work / f"{ds}.removed.qrels"
    run.write_text("\n".join(kept) + "\n")
    marked.write_text("\n".join(marks) + "\n")
    return run, marked


def features_of(setting: str, ds: str, run: Path, qrels: Path, grade: int, out: Path, work: Path) -> dict:
    """Each query's (docids, feature rows) in the returned order, from a ``--calibrate`` run (made once)."""
    files = dataset_files(work, ds)
    if not out.with_suffix(".stats.jsonl").exists():
        command = [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank",
                   *SETTINGS[setting], "--corpus", str(files["corpus"]), "--topics", str(files["topics"]),
                   "--qrels", str(files["qrels"]), "--calibrate", str(qrels), "--relevant-grade", str(grade),
                   "--calibration", str(out.with_suffix(".map.json")), "-o", str(out), "-q", "--overwrite"]
        subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, "ACURANK_CACHE": str(work / "calls.sqlite")})
    out_features = {}
    for qid, record in read_stats(out.with_suffix(".stats.jsonl")).items():
        found = record.calibration_features
        out_features[qid] = (list(found["docids"]), [tuple(x) for x in found["x"]])
    return out_features


def applied(m: rel.CalibrationMap, rows) -> list[float]:
    """P(relevant) of one query's documents, in the returned order, as the CLI gives it."""
    return rel.monotone(m.of_matrix(rows), list(range(1, len(rows) + 1))).tolist()


def one_draw(m: rel.CalibrationMap, test: list[str], intact: dict, removed: dict, labels) -> dict:
    p_all, y_all, f1, oracle, none_intact, none_removed = [], [], [], [], [], []
    for q in test:
        docids, rows = intact[q]
        p = applied(m, rows)
        y = [labels(q, d) for d in docids]
        p_all += p
        y_all += y
        f1.append(rel.f1_at(y, rel.expected_f1_cut(p)))
        oracle.append(rel.oracle_f1(y))
        if any(y):
            none_intact.append(rel.p_none(p))
        if q in removed:
            none_removed.append(rel.p_none(applied(m, removed[q][1])))
    mean = statistics.fmean
    return {"ece": rel.calibration_error(p_all, y_all)[0], "brier": rel.brier(p_all, y_all),
            "f1_over_oracle": mean(f1) / mean(oracle) if mean(oracle) else None,
            "auc_p_none": rel.auc(none_removed, none_intact)}


def study(setting: str, ds: str, draws: int, work: Path) -> dict:
    grade = GRADES[ds]
    files = dataset_files(work, ds)
    judged = read_qrels(files["qrels"])
    intact = features_of(setting, ds, files["run"], files["qrels"], grade, work / f"{setting}.{ds}.run", work)
    removed_run, marked = removed_lists(files, grade, work, ds)
    removed = features_of(setting, ds, removed_run, marked, 1, work / f"{setting}.{ds}.removed.run", work)
    labels = lambda q, d: int(judged.get(q, {}).get(d, 0) >= grade)  # noqa: E731
    pool = sorted(q for q in intact if q in judged)
    # the floor: a map fit on every judged query, the test queries among them, measured on each draw's test queries
    everyone = rel.fit([r for q in pool for r in intact[q][1]], [labels(q, d) for q in pool for d in intact[q][0]], grade)
    rows = []
    for n in SIZES:
        if n >= len(pool):
            continue
        measured, unfit, floor = [], 0, []
        for draw in range(draws):
            chosen = random.Random(f"few-judged|{setting}|{ds}|{n}|{draw}").sample(pool, n)
            floor.append(one_draw(everyone, [q for q in pool if q not in set(chosen)], intact, removed, labels)["ece"])
            x = [r for q in chosen for r in intact[q][1]]
            y = [labels(q, d) for q in chosen for d in intact[q][0]]
            try:
                m = rel.fit(x, y, grade)
            except rel.InputError:
                unfit += 1
                continue
            measured.append(one_draw(m, [q for q in pool if q not in set(chosen)], intact, removed, labels))
        row = {"setting": setting, "dataset": ds, "n": n, "draws": len(measured), "unfit_draws": unfit,
               "test_queries": len(pool) - n}
        for key in ("ece", "brier", "f1_over_oracle", "auc_p_none"):
            values = [d[key] for d in measured if d[key] is not None]
            row[key] = statistics.fmean(values) if values else None
            row[f"{key}_se"] = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else None
        row["ece_fit_on_all"] = statistics.fmean(floor)  # what the test queries' own sampling leaves (see above)
        rows.append(row)
    smallest = next((r["n"] for r in rows if r["ece"] is not None and r["ece"] <= TARGET_ECE), None)
    return {"setting": setting, "dataset": ds, "grade": grade, "queries": len(pool), "rows": rows,
            "smallest_n_ece_at_most_0.05": smallest}


def _cell(value, se, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}" + ("" if se is None else f" ({se:.{digits}f})")


def arguments(description: str, settings: list[str], draws: int) -> argparse.Namespace:
    """The command line of this study and of those that reuse its runs (``--work``: where the runs are kept)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--settings", nargs="+", default=settings, choices=list(SETTINGS))
    ap.add_argument("--datasets", nargs="+", default=list(GRADES), choices=list(GRADES))
    ap.add_argument("--draws", type=int, default=draws)
    ap.add_argument("--work", type=Path, default=Path("/tmp/acurank-few-judged"))
    ap.add_argument("--out", default=None, help="the results' name (benchmarks/results/NAME.json)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    return args


def main() -> None:
    args = arguments(__doc__.splitlines()[0], ["minilm", "sim1", "sim2"], 20)
    results = [study(s, ds, args.draws, args.work) for s in args.settings for ds in args.datasets]
    print("| setting | dataset | N | draws (unfit) | ECE (s.e.) | Brier (s.e.) | cut F1 / oracle (s.e.) | P(none) AUC (s.e.) "
          "| ECE, map fit on all |")
    print("|---|---|---:|---:|---|---|---|---|---|")
    for res in results:
        for r in res["rows"]:
            print(f"| {r['setting']} | {r['dataset']} | {r['n']} | {r['draws']} ({r['unfit_draws']}) | "
                  f"{_cell(r['ece'], r['ece_se'])} | {_cell(r['brier'], r['brier_se'])} | "
                  f"{_cell(r['f1_over_oracle'], r['f1_over_oracle_se'], 3)} | {_cell(r['auc_p_none'], r['auc_p_none_se'], 3)} | "
                  f"{r['ece_fit_on_all']:.4f} |")
    for res in results:
        print(f"{res['setting']} {res['dataset']} ({res['queries']} judged queries): smallest N with ECE <= "
              f"{TARGET_ECE}: {res['smallest_n_ece_at_most_0.05']}")
    save(args.out or "few_judged", {"draws": args.draws, "sizes": SIZES, "target_ece": TARGET_ECE, "results": results})
    print(json.dumps({"saved": f"benchmarks/results/{args.out or 'few_judged'}.json"}))


if __name__ == "__main__":
    main()
