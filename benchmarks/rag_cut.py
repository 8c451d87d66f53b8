"""Cutting RAG context (issue 83, item 7): what a RAG user gets from each way of deciding how many of a query's
reranked documents to hand the LLM.

    PYTHONPATH=. python benchmarks/rag_cut.py [--settings minilm sim1] [--datasets dl19 dl20 scifact] [--draws 10]
        [--work DIR]

Each collection is reranked once with ``acurank rerank --method acurank --calibrate`` as a user runs it (the runs of
``benchmarks/few_judged.py``, made there or here, in the same ``--work`` folder): every query's map features (its
final ratings' logit p_topk, z(mu), log rank, in the returned order) land in its stats. The judged queries, sorted,
are split in two: the odd positions are the user's judged queries (a map is fit on them), the even positions are
the queries the measures are taken on, the same for every row. Relevant: grade >= 2 on TREC DL, >= 1 on SciFact
(as BENCHMARKS.md sections 25 and 29). Down the returned order, each way keeps:

- ``top-5``, ``top-10``: the first 5 or 10 (the fixed top-k of a RAG pipeline);
- ``min_p_topk 0.5``: the documents whose P(in the top k = 10) is at least 0.5 (the API's ``min_p_topk``, no map);
- ``min_p_relevant 0.5``: those whose P(relevant) is at least 0.5 (``min_p_relevant``, ``--cut p:0.5``), under a map
  fit on all the judged half;
- ``--cut f1``: the cut that maximises the expected F1 (:func:`acurank_cli.relevance.expected_f1_cut`), under that
  map, and under maps fit on N = 10 and 20 judged queries drawn from the judged half (``--draws`` draws each,
  averaged);
- the oracle cut (the best prefix for each query, known only with the labels), as the ceiling.

P(relevant) is the CLI's: :meth:`CalibrationMap.of_matrix` then :func:`relevance.monotone` down the order, and a cut
keeps what :class:`relevance.Cut` keeps. Measures over the measured half: mean F1 per query (recall over the
query's relevant candidates; a query with none scores 1 for an empty answer, else 0: :func:`relevance.f1_kept`),
mean documents kept, queries returned empty, and of those, how many had a relevant candidate.

Results: benchmarks/results/rag_cut.json and the table printed (BENCHMARKS.md section 32; docs/relevance.md).
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from acurank_cli import relevance as rel  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402

from common import save  # noqa: E402
from few_judged import GRADES, applied, arguments, features_of  # noqa: E402
from method_comparison import dataset_files  # noqa: E402

THRESHOLD = 0.5
SIZES = (10, 20)


def _measure(kept: dict[str, list[bool]], labels: dict[str, list[int]]) -> dict:
    """Mean F1, mean documents kept, queries empty (and empty with a relevant candidate) over the measured queries."""
    f1 = [rel.f1_kept(labels[q], kept[q]) for q in kept]
    sizes = [sum(kept[q]) for q in kept]
    empty = [q for q in kept if not any(kept[q])]
    return {"f1": statistics.fmean(f1), "kept": statistics.fmean(sizes), "empty": len(empty),
            "empty_with_relevant": sum(1 for q in empty if any(labels[q]))}


def _cut(m: rel.CalibrationMap, rows, cut: rel.Cut) -> list[bool]:
    keep = cut.positions(applied(m, rows))
    return [i in keep for i in range(len(rows))]


def _mean_rows(rows: list[dict]) -> dict:
    out = {key: statistics.fmean(r[key] for r in rows) for key in ("f1", "kept", "empty", "empty_with_relevant")}
    out["f1_se"] = statistics.stdev(r["f1"] for r in rows) / len(rows) ** 0.5 if len(rows) > 1 else None
    out["draws"] = len(rows)
    return out


def study(setting: str, ds: str, draws: int, work: Path) -> dict:
    grade = GRADES[ds]
    files = dataset_files(work, ds)
    judged = read_qrels(files["qrels"])
    intact = features_of(setting, ds, files["run"], files["qrels"], grade, work / f"{setting}.{ds}.run", work)
    pool = sorted(q for q in intact if q in judged)
    fitting, measured = pool[0::2], pool[1::2]
    labels = {q: [int(judged[q].get(d, 0) >= grade) for d in intact[q][0]] for q in pool}

    def fit_on(queries: list[str]) -> rel.CalibrationMap:
        return rel.fit([r for q in queries for r in intact[q][1]], [y for q in queries for y in labels[q]], grade)

    rows: dict[str, dict] = {}
    for k in (5, 10):
        rows[f"top-{k}"] = _measure({q: [i < k for i in range(len(labels[q]))] for q in measured}, labels)
    p_topk = {q: [1.0 / (1.0 + math.exp(-r[0])) for r in intact[q][1]] for q in measured}
    rows[f"min_p_topk {THRESHOLD}"] = _measure({q: [p >= THRESHOLD for p in p_topk[q]] for q in measured}, labels)
    half = fit_on(fitting)
    rows[f"min_p_relevant {THRESHOLD} (map: {len(fitting)} judged)"] = _measure(
        {q: _cut(half, intact[q][1], rel.Cut("p", THRESHOLD)) for q in measured}, labels)
    rows[f"--cut f1 (map: {len(fitting)} judged)"] = _measure(
        {q: _cut(half, intact[q][1], rel.Cut("f1")) for q in measured}, labels)
    for n in SIZES:
        per_draw, unfit = [], 0
        for draw in range(draws):
            chosen = random.Random(f"rag-cut|{setting}|{ds}|{n}|{draw}").sample(fitting, n)
            try:
                m = fit_on(chosen)
            except rel.InputError:  # the drawn queries hold no relevant document (or no other): no map
                unfit += 1
                continue
            per_draw.append(_measure({q: _cut(m, intact[q][1], rel.Cut("f1")) for q in measured}, labels))
        rows[f"--cut f1 (map: {n} judged)"] = {**_mean_rows(per_draw), "unfit_draws": unfit}
    best = {q: max(range(len(labels[q]) + 1), key=lambda k: (rel.f1_at(labels[q], k), -k)) for q in measured}
    rows["oracle cut"] = _measure({q: [i < best[q] for i in range(len(labels[q]))] for q in measured}, labels)
    return {"setting": setting, "dataset": ds, "grade": grade, "fitting_queries": len(fitting),
            "measured_queries": len(measured),
            "measured_with_relevant": sum(1 for q in measured if any(labels[q])), "rows": rows}


def main() -> None:
    args = arguments(__doc__.splitlines()[0], ["minilm", "sim1"], 10)
    results = [study(s, ds, args.draws, args.work) for s in args.settings for ds in args.datasets]
    print("| setting | dataset (measured queries, with a relevant candidate) | way | F1 | documents kept | "
          "queries empty (with a relevant candidate) |")
    print("|---|---|---|---:|---:|---:|")
    for res in results:
        where = f"{res['dataset']} ({res['measured_queries']}, {res['measured_with_relevant']})"
        for name, r in res["rows"].items():
            f1 = f"{r['f1']:.3f}" + (f" ({r['f1_se']:.3f})" if r.get("f1_se") is not None else "")
            print(f"| {res['setting']} | {where} | {name} | {f1} | {r['kept']:.1f} | "
                  f"{r['empty']:.1f} ({r['empty_with_relevant']:.1f}) |")
    save("rag_cut", {"threshold": THRESHOLD, "sizes": SIZES, "draws": args.draws, "results": results})
    print(json.dumps({"saved": "benchmarks/results/rag_cut.json"}))


if __name__ == "__main__":
    main()
