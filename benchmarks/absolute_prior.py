"""Issue 83, item 4: where the backend has an absolute score, use it. MiniLM's own score (the cosine of a candidate to
its query) added to the calibration map's features, and the map's P(relevant) adjusted to the applied queries' share
of relevant candidates by EM on their unlabelled candidates (Saerens, Latinne and Decaestecker 2002, "Adjusting the
outputs of a classifier to new a priori probabilities"), each fit on one TREC DL year and measured on the other, both
directions, grade >= 2 relevant, against the map alone (BENCHMARKS.md section 25's row).

    PYTHONPATH=. python benchmarks/absolute_prior.py [--work DIR] [--out NAME]

The runs are benchmarks/relevance.py's ``minilm`` setting, made as a user makes them (``acurank rerank --calibrate``
on the fitting year with ``--trace``; ``--calibration MAP --cut f1 --trace`` on the other): each document's final
rating (mu, sigma, p_topk, rank) comes from the trace's last step, its cosine from MiniLM itself (relevance.cosines).
Four maps, each a logistic fit (acurank's ``relevance.fit``) on the fitting year's documents and applied with the
per-query isotonic step (P(relevant) never rises down the ranking, as every entrance applies it):

* ``map``: the map's own features (logit p_topk, z(mu), log rank), what ``--calibrate`` writes;
* ``map+cosine``: those and the cosine;
* ``map+EM`` and ``map+cosine+EM``: each adjusted to the test year's prior (over all its queries' candidates; ``EM per
  query``: each query's candidates alone, what a run could do as each query finishes): starting from the fitting year's share
  of relevant candidates pi_fit, repeat pi <- mean of p_i' where p_i' = (pi/pi_fit) p_i / ((pi/pi_fit) p_i +
  ((1-pi)/(1-pi_fit)) (1-p_i)), until pi moves less than 1e-7 (a monotone map of each p_i: the order holds).

Measured on the test year: ECE (10 equal-width bins) and Brier score, the mean P(relevant) against the true share,
and EM's estimate of that share. Results: benchmarks/results/absolute_prior.json and the table printed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import relevance as bench  # noqa: E402  (benchmarks/relevance.py: the runs and the cosines)
from acurank_cli import relevance as rel  # noqa: E402
from acurank_cli.io.collection_files import read_qrels  # noqa: E402

from common import save, work_and_out  # noqa: E402

SETTING = "minilm"


def final_ratings(trace: Path) -> dict[str, list[dict]]:
    """Each query's documents at the trace's last step (mu, sigma, p_topk, rank), best first."""
    out = {}
    with open(trace) as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["phase"] == "done":
                out[rec["qid"]] = sorted(rec["docs"], key=lambda d: d["rank"])
    return out


def rows(ds: str, trace: Path, work: Path) -> dict:
    """Per query: the map's features, the cosine, the ranks and the 0/1 labels (grade >= 2), best first."""
    qrels = read_qrels(bench.SAMPLE / ds / "qrels.txt")
    cos = bench.cosines(ds, work)
    out = {}
    for q, docs in final_ratings(trace).items():
        x = rel.feature_matrix([d["mu"] for d in docs], [d["p_topk"] for d in docs], [d["rank"] for d in docs],
                               [d["sigma"] for d in docs])
        out[q] = {"x": x, "cos": np.array([cos[q][d["docid"]] for d in docs]),
                  "rank": [d["rank"] for d in docs],
                  "y": np.array([int(qrels.get(q, {}).get(d["docid"], 0) >= bench.GRADE) for d in docs])}
    return out


def design(data: dict, with_cosine: bool) -> np.ndarray:
    return np.vstack([np.column_stack([v["x"], v["cos"]]) if with_cosine else v["x"] for v in data.values()])


def applied(m: rel.CalibrationMap, data: dict, with_cosine: bool) -> np.ndarray:
    """P(relevant) of every test document, each query's through the isotonic step, in the data's order."""
    parts = []
    for v in data.values():
        x = np.column_stack([v["x"], v["cos"]]) if with_cosine else v["x"]
        parts.append(rel.monotone(m.of_matrix(x), v["rank"]))
    return np.concatenate(parts)


def em(p: np.ndarray, prior_fit: float, tol: float = 1e-7, most: int = 1000) -> tuple[np.ndarray, float, int]:
    """Saerens et al.'s EM: the probabilities adjusted to the prior that they themselves imply on these documents
    (their labels unseen); returns (adjusted, the estimated prior, iterations)."""
    p = np.clip(p, 1e-9, 1 - 1e-9)
    pi, adjusted = prior_fit, p
    for i in range(1, most + 1):
        a, b = pi / prior_fit, (1 - pi) / (1 - prior_fit)
        adjusted = a * p / (a * p + b * (1 - p))
        new = float(adjusted.mean())
        if abs(new - pi) < tol:
            return adjusted, new, i
        pi = new
    return adjusted, pi, most


def measure(train: str, test: str, work: Path) -> dict:
    cli = bench.measure(SETTING, train, test, work)  # the runs (made once), and section 25's own figures
    fit_rows = rows(train, work / f"{SETTING}.{train}.trace.jsonl", work)
    test_rows = rows(test, work / f"{SETTING}.{train}-{test}.cut.trace.jsonl", work)
    y_fit = np.concatenate([v["y"] for v in fit_rows.values()])
    y = np.concatenate([v["y"] for v in test_rows.values()])
    prior_fit = float(y_fit.mean())
    out = {"train": train, "test": test, "documents": int(len(y)), "share": {"fit": prior_fit, "test": float(y.mean())},
           "cli_p_relevant": cli["calibration"]["p_relevant"], "maps": {}}
    for name, with_cosine in (("map", False), ("map+cosine", True)):
        m = rel.fit(design(fit_rows, with_cosine), y_fit, bench.GRADE)
        p = applied(m, test_rows, with_cosine)
        adjusted, estimate, iterations = em(p, prior_fit)
        sizes = np.cumsum([len(v["y"]) for v in test_rows.values()])[:-1]  # EM within each query alone
        per_query = np.concatenate([em(part, prior_fit)[0] for part in np.split(p, sizes)])
        for label, probs in ((name, p), (name + "+EM", adjusted), (name + "+EM per query", per_query)):
            out["maps"][label] = {"ece": rel.calibration_error(probs.tolist(), y.tolist())[0],
                                  "brier": rel.brier(probs.tolist(), y.tolist()), "mean_p": float(probs.mean())}
        out["maps"][name + "+EM"].update(estimated_share=estimate, iterations=iterations)
        out["maps"][name]["coef"] = dict(zip([*rel.FEATURES, *(["cosine"] if with_cosine else [])],
                                             map(float, m.coef)))
    return out


def main() -> None:
    args = work_and_out(__doc__, "/tmp/acurank-relevance", "absolute_prior")
    started = time.perf_counter()
    results = [measure(a, b, args.work) for a, b in (("dl19", "dl20"), ("dl20", "dl19"))]
    for r in results:
        print(f"{r['train']} -> {r['test']}: share of relevant candidates {r['share']['fit']:.3f} / {r['share']['test']:.3f}; "
              f"the CLI's P(relevant): ECE {r['cli_p_relevant']['ece']:.4f}, Brier {r['cli_p_relevant']['brier']:.4f}")
        for name, m in r["maps"].items():
            share = f"  EM's share {m['estimated_share']:.3f}" if "estimated_share" in m else ""
            print(f"  {name:24s} ECE {m['ece']:.4f}  Brier {m['brier']:.4f}  mean P {m['mean_p']:.3f}{share}")
    save(args.out, {"setting": SETTING, "results": results, "seconds": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    main()
