"""Where relevance ends, measured: P(relevant) from a calibration map fit on one TREC DL year and applied to the
other, against Platt scaling on single scores; the expected-F1 cut against the oracle cut and the best fixed top-k;
"nothing here"; the cut-targeted uncertain set against the top-k one.

    PYTHONPATH=. python benchmarks/relevance.py [--settings minilm sim1 sim2 sim1-pivot sim2-pivot] [--work DIR]
        [--out FILE.json]

For each reranker setting (MiniLM; the simulated reranker at noise 1 and 2, without and with a pivot in every window,
``--pivot simulated``: a document of grade 1.5) and each direction (fit on DL19, test on DL20; and the reverse),
everything runs as ``acurank rerank`` (the CLI as a user runs it), grade >= 2 relevant:

1. the training year reranked with ``--calibrate QRELS --relevant-grade 2 --calibration MAP`` (and ``--trace``: its
   final p_topk, for the Platt baseline);
2. the test year with ``--calibration MAP --cut f1 --cut-target topk`` (its P(relevant) and P(none) in the stats; the
   cut in the run), and again with ``--cut-target cut`` (the uncertain set at the cut's boundary);
3. the test year's candidate lists with every grade >= 2 document removed ("nothing here"), and, as the equal-length
   control, the intact lists with as many randomly chosen (seeded) other documents removed.

Measured on the test year: expected calibration error (10 equal-width bins) and Brier score of P(relevant), and of
Platt scaling fit on the training year on the BM25 score, on MiniLM's cosine similarity to the query (the MiniLM
reranker's own score) and on the final p_topk; mean F1 at the cut, at the oracle cut and at the fixed top-k that was
best on the training year; the ROC AUC of P(none) between the removed lists and the intact ones (the issue's protocol)
and between the removed lists and the equal-length controls; calls per query of both targets.

Results: benchmarks/results/relevance.json (and the tables printed, as BENCHMARKS.md section 25 shows them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from acurank_cli.io.collection_files import read_qrels  # noqa: E402
from acurank_cli.io.run_files import read_stats  # noqa: E402
from acurank_cli.io.runs import read_scores  # noqa: E402
from acurank_cli import relevance as rel  # noqa: E402

from common import save  # noqa: E402

SAMPLE = ROOT / "sample_runs"
GRADE = 2
SETTINGS = {"minilm": ["--reranker", "minilm"],
            "sim1": ["--reranker", "simulated", "--sim-noise", "1"],
            "sim2": ["--reranker", "simulated", "--sim-noise", "2"],
            "sim1-pivot": ["--reranker", "simulated", "--sim-noise", "1", "--pivot", "simulated"],
            "sim2-pivot": ["--reranker", "simulated", "--sim-noise", "2", "--pivot", "simulated"]}


def ordered(run: dict[str, dict[str, float]]) -> dict[str, list[tuple[str, float]]]:
    """Each query's documents in trec_eval's order (score descending, ties by docid descending)."""
    return {q: sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True) for q, docs in run.items()}


def variants(ds: str, work: Path) -> dict[str, Path]:
    """The year's run as it is, with its relevant documents removed, and the equal-length controls."""
    qrels = read_qrels(SAMPLE / ds / "qrels.txt")
    lines = (SAMPLE / ds / "bm25.run").read_text().splitlines()
    by_q: dict[str, list[str]] = {}
    for line in lines:
        by_q.setdefault(line.split()[0], []).append(line)
    removed, matched = [], []
    for q, block in by_q.items():
        relevant = {ln.split()[2] for ln in block if qrels.get(q, {}).get(ln.split()[2], 0) >= GRADE}
        kept = [ln for ln in block if ln.split()[2] not in relevant]
        removed += kept
        others = [ln.split()[2] for ln in kept]
        drop = set(random.Random(f"relevance|{q}").sample(others, min(len(relevant), len(others))))
        matched += [ln for ln in block if ln.split()[2] not in drop]
    paths = {"intact": SAMPLE / ds / "bm25.run", "removed": work / f"{ds}.removed.run",
             "matched": work / f"{ds}.matched.run"}
    paths["removed"].write_text("\n".join(removed) + "\n")
    paths["matched"].write_text("\n".join(matched) + "\n")
    return paths


#: the folder of DL19's and DL20's pivot passages for the ``minilm-pivot`` setting (``--pivots DIR``:
#: DIR/dl19.pivots.tsv and DIR/dl20.pivots.tsv, written by benchmarks/write_pivots.py)
PIVOTS: list[Path] = []


def setting_args(setting: str, ds: str) -> list[str]:
    if setting == "minilm-pivot":
        return ["--reranker", "minilm", "--pivot", str(PIVOTS[0] / f"{ds}.pivots.tsv")]
    return SETTINGS[setting]


def rerank(setting: str, ds: str, run: Path, out: Path, extra: list[str], work: Path) -> None:
    if out.exists():
        return
    command = [sys.executable, "-m", "acurank_cli", "rerank", str(run), *setting_args(setting, ds),
               "--corpus", str(SAMPLE / ds / "passages.jsonl.gz"), "--topics", str(SAMPLE / ds / "topics.tsv"),
               "--qrels", str(SAMPLE / ds / "qrels.txt"), "-o", str(out), "-q", "--overwrite", *extra]
    subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, "ACURANK_CACHE": str(work / "calls.sqlite")})


def final_p_topk(trace: Path) -> dict[str, dict[str, float]]:
    """Each query's final p_topk per document (the trace's done step)."""
    out = {}
    with open(trace) as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["phase"] == "done":
                out[rec["qid"]] = {d["docid"]: d["p_topk"] for d in rec["docs"]}
    return out


def cosines(ds: str, work: Path) -> dict[str, dict[str, float]]:
    """MiniLM's cosine similarity of each candidate to its query (the MiniLM reranker's own score)."""
    path = work / f"{ds}.cosines.json"
    if path.exists():
        return json.loads(path.read_text())
    from acurank_cli.records import Doc
    from acurank_cli.rerankers.backends.minilm import MiniLMReranker, passage_text

    model = MiniLMReranker()
    model.use_store(str(work / "calls.sqlite"))
    topics = dict(line.rstrip("\n").split("\t", 1) for line in (SAMPLE / ds / "topics.tsv").read_text().splitlines())
    texts = {}
    with gzip.open(SAMPLE / ds / "passages.jsonl.gz", "rt") as fh:
        for line in fh:
            o = json.loads(line)
            texts[str(o.get("_id", o.get("id")))] = passage_text(Doc("x", o.get("text", o.get("contents", "")),
                                                                    o.get("title") or ""))
    out = {}
    for q, docs in ordered(read_scores(SAMPLE / ds / "bm25.run")).items():
        vectors = model.embed([topics[q], *(texts[d] for d, _ in docs)])
        qv = vectors[topics[q]][0]
        out[q] = {d: float(qv @ vectors[texts[d]][0]) for d, _ in docs}
    model.close()
    path.write_text(json.dumps(out))
    return out


def measure(setting: str, train: str, test: str, work: Path) -> dict:
    runs = {ds: variants(ds, work) for ds in (train, test)}
    tag = f"{setting}.{train}-{test}"
    mapfile = work / f"{setting}.{train}.map.json"
    fit_run = work / f"{setting}.{train}.run"
    rerank(setting, train, runs[train]["intact"], fit_run,
           ["--calibrate", str(SAMPLE / train / "qrels.txt"), "--relevant-grade", str(GRADE), "--calibration",
            str(mapfile), "--trace", str(work / f"{setting}.{train}.trace.jsonl")], work)
    apply = ["--calibration", str(mapfile)]
    out = {name: work / f"{tag}.{name}.run" for name in ("cut", "cut-target", "removed", "matched", "plain")}
    rerank(setting, test, runs[test]["intact"], out["cut"], [*apply, "--cut", "f1", "--cut-target", "topk", "--trace",
                                                               str(work / f"{tag}.cut.trace.jsonl")], work)
    rerank(setting, test, runs[test]["intact"], out["cut-target"], [*apply, "--cut", "f1", "--cut-target", "cut"], work)
    rerank(setting, test, runs[test]["removed"], out["removed"], apply, work)
    rerank(setting, test, runs[test]["matched"], out["matched"], apply, work)

    q_train, q_test = read_qrels(SAMPLE / train / "qrels.txt"), read_qrels(SAMPLE / test / "qrels.txt")
    first = {ds: read_scores(SAMPLE / ds / "bm25.run") for ds in (train, test)}
    cos = {ds: cosines(ds, work) for ds in (train, test)}
    topk = {train: final_p_topk(work / f"{setting}.{train}.trace.jsonl"),
            test: final_p_topk(work / f"{tag}.cut.trace.jsonl")}
    labels = lambda qrels, q, d: int(qrels.get(q, {}).get(d, 0) >= GRADE)  # noqa: E731

    def rows(ds, qrels, order: dict[str, list[str]]):
        X = {"bm25": [], "minilm": [], "p_topk": []}
        y = []
        for q, docs in order.items():
            for d in docs:
                X["bm25"].append((first[ds][q][d],))
                X["minilm"].append((cos[ds][q][d],))
                X["p_topk"].append((min(1 - 1e-6, max(1e-6, topk[ds][q][d])),))
                y.append(labels(qrels, q, d))
        return X, y

    train_order = {q: [d for d, _ in docs] for q, docs in ordered(read_scores(fit_run)).items()}
    test_stats = read_stats(out["cut"].with_suffix(".stats.jsonl"))
    test_order = {q: list(r.relevance.p) for q, r in test_stats.items()}
    Xtr, ytr = rows(train, q_train, train_order)
    Xte, yte = rows(test, q_test, test_order)
    result: dict = {"setting": setting, "train": train, "test": test, "test_documents": len(yte),
                    "base_rate": {"train": sum(ytr) / len(ytr), "test": sum(yte) / len(yte)}, "calibration": {}}
    p_rel = [test_stats[q].relevance.p[d] for q, docs in test_order.items() for d in docs]
    result["calibration"]["p_relevant"] = {"ece": rel.calibration_error(p_rel, yte)[0], "brier": rel.brier(p_rel, yte),
                                           "mean_p": sum(p_rel) / len(p_rel)}
    for name in ("bm25", "minilm", "p_topk"):
        platt = rel.fit(Xtr[name], ytr, GRADE)
        p = [platt.probability(x) for x in Xte[name]]
        result["calibration"][f"platt_{name}"] = {"ece": rel.calibration_error(p, yte)[0], "brier": rel.brier(p, yte),
                                                  "mean_p": sum(p) / len(p)}
    # truncation: F1 at the cut, the oracle's, the fixed top-k best on the training year
    def f1s(order, qrels, cut_run):
        per_q, oracle = [], []
        for q, docs in order.items():
            lab = [labels(qrels, q, d) for d in docs]
            oracle.append(rel.oracle_f1(lab))
            kept = cut_run.get(q, {})
            per_q.append(rel.f1_kept(lab, [d in kept for d in docs]))
        return per_q, oracle

    depth = max(len(v) for v in train_order.values())
    fixed_train = {k: sum(rel.f1_at([labels(q_train, q, d) for d in docs], k) for q, docs in train_order.items())
                   / len(train_order) for k in range(depth + 1)}
    best_k = max(fixed_train, key=lambda k: (fixed_train[k], -k))
    cut_f1, oracle = f1s(test_order, q_test, read_scores(out["cut"]))
    target_stats = read_stats(out["cut-target"].with_suffix(".stats.jsonl"))
    target_order = {q: list(r.relevance.p) for q, r in target_stats.items()}
    target_f1, target_oracle = f1s(target_order, q_test, read_scores(out["cut-target"]))
    fixed_test = sum(rel.f1_at([labels(q_test, q, d) for d in docs], best_k) for q, docs in test_order.items()) / len(test_order)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    result["truncation"] = {"f1_cut": mean(cut_f1), "f1_oracle": mean(oracle), "ratio_to_oracle": mean(cut_f1) / mean(oracle),
                            "best_fixed_k_on_train": best_k, "f1_fixed_k": fixed_test,
                            "mean_kept": mean([r.relevance.kept for r in test_stats.values()])}
    result["cut_target"] = {"topk": {"calls": mean([r.calls for r in test_stats.values()]), "f1": mean(cut_f1)},
                            "cut": {"calls": mean([r.calls for r in target_stats.values()]), "f1": mean(target_f1),
                                    "f1_oracle": mean(target_oracle),
                                    "ratio_to_oracle": mean(target_f1) / mean(target_oracle),
                                    "mean_kept": mean([r.relevance.kept for r in target_stats.values()])}}
    # nothing here
    none = {name: {q: r.relevance.p_none for q, r in read_stats(out[name].with_suffix(".stats.jsonl")).items()}
            for name in ("removed", "matched")}
    intact = {q: r.relevance.p_none for q, r in test_stats.items()
              if any(labels(q_test, q, d) for d in r.relevance.p)}
    removed = list(none["removed"].values())
    result["nothing_here"] = {
        "queries": {"removed": len(removed), "intact_with_relevant": len(intact), "matched": len(none["matched"])},
        "auc_intact_vs_removed": rel.auc(removed, list(intact.values())),
        "auc_matched_vs_removed": rel.auc(removed, [v for q, v in none["matched"].items() if q in intact]),
        "median_p_none": {"removed": sorted(removed)[len(removed) // 2],
                          "intact": sorted(intact.values())[len(intact) // 2]}}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=[*SETTINGS, "minilm-pivot"])
    parser.add_argument("--pivots", type=Path, default=None, help="minilm-pivot: DIR with dl19.pivots.tsv and "
                        "dl20.pivots.tsv (benchmarks/write_pivots.py)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/acurank-relevance"))
    parser.add_argument("--out", default="relevance")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if "minilm-pivot" in args.settings:
        if args.pivots is None:
            parser.error("minilm-pivot needs --pivots DIR")
        PIVOTS.append(args.pivots)
    started = time.perf_counter()
    results = [measure(s, a, b, args.work) for s in args.settings for a, b in (("dl19", "dl20"), ("dl20", "dl19"))]
    print("setting   fit->test    ECE P(rel)  Brier P(rel) | Brier Platt bm25 minilm p_topk | F1 cut  oracle  fixed-k(k) "
          "| AUC none issue  equal-length | calls topk/cut  F1 topk/cut")
    for r in results:
        c, t, n, ct = r["calibration"], r["truncation"], r["nothing_here"], r["cut_target"]
        print(f"{r['setting']:8s}  {r['train']}->{r['test']}  {c['p_relevant']['ece']:.4f}      {c['p_relevant']['brier']:.4f}      | "
              f"{c['platt_bm25']['brier']:.4f} {c['platt_minilm']['brier']:.4f} {c['platt_p_topk']['brier']:.4f} | "
              f"{t['f1_cut']:.4f} {t['f1_oracle']:.4f} {t['f1_fixed_k']:.4f}({t['best_fixed_k_on_train']}) | "
              f"{n['auc_intact_vs_removed']:.3f} {n['auc_matched_vs_removed']:.3f} | "
              f"{ct['topk']['calls']:.2f}/{ct['cut']['calls']:.2f} {ct['topk']['f1']:.4f}/{ct['cut']['f1']:.4f}")
    path = save(args.out, {"command": " ".join(sys.argv), "seconds": time.perf_counter() - started, "grade": GRADE,
                           "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
