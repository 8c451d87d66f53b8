"""Why no default of acurank-auto can tell a persistently wrong reranker from a right one (the limit)

    python benchmarks/identifiability.py [--queries 2000] [--n 100] [--seed 0]

Two views of each candidate's true relevance r ~ N(0, V): the first stage's score b = r + e, e ~ N(0, se2), and
the reranker's judgement r + u, u ~ N(0, su2), the same in every window (persistent error; fresh noise per window
is left out: contradictions between windows reveal it, and acurank-auto learns it). A method sees b and the
reranker's *orders*, i.e. the ranks of r + u, whose scale is invisible. (b, ranks of r + u) is then a function of a
bivariate normal pair whose observable law depends only on var(b) = V + se2 and the correlation
rho = V / sqrt((V + se2)(V + su2)). Two worlds with the same var(b) and rho:

- A: V = 1, se2 = 1, su2 = 0: the reranker is exact, the first stage noisy (trust the answers: lambda = 1);
- B: V = 2, se2 = 0, su2 = 2: the first stage is exact, the reranker persistently wrong (trust the prior).

Every method, whatever it computes from what it sees, has the same output law in A and B, while the right output
is the answers' order in A and the prior's in B. This script draws both worlds and checks that what a method can
see has the same distribution (Kendall tau between b and the answers, sd of b; two-sample Kolmogorov-Smirnov
p-values) and that the best order differs (top-10 overlap with the truth of the order by the answers and by b).
A third view (a second reranker, or labels) breaks the tie; the answers and the prior alone cannot.

With ``--simulated OUT`` it also tabulates how the comparison's simulated settings *can* be told apart (OUT as in
``method_comparison.py``, where SciFact's BM25 run is made or found): the mean Kendall tau between the presented
(BM25) order and the answer over the first pass's windows (disjoint windows of 20 down the BM25 list; the
simulated reranker at seed 0, and minilm, about 8 minutes on 2 cores). At noise 0 equal grades keep their
presented order, so the answers agree with BM25 far more than under persistent error; a real reranker orders
equal grades by its own judgement (minilm, self-consistent, agrees with BM25 no more than the noisy settings do),
so that signal belongs to the simulator, and acurank-auto does not read it.

Writes benchmarks/results/identifiability.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
WORLDS = {"A (reranker exact, prior noisy)": (1.0, 1.0, 0.0), "B (prior exact, reranker persistently wrong)": (2.0, 0.0, 2.0)}


def draw(rng: np.random.Generator, v: float, se2: float, su2: float, n: int, queries: int, k: int = 10) -> dict:
    """Per query: Kendall tau(b, answers), sd(b), and the top-k overlap with the truth of both orders."""
    tau, sd, by_answers, by_prior = [], [], [], []
    for _ in range(queries):
        r = rng.normal(0.0, np.sqrt(v), n)
        b = r + rng.normal(0.0, np.sqrt(se2), n)
        judged = r + rng.normal(0.0, np.sqrt(su2), n)
        best = set(np.argsort(-r)[:k].tolist())
        tau.append(stats.kendalltau(b, judged).statistic)
        sd.append(b.std())
        by_answers.append(len(best & set(np.argsort(-judged)[:k].tolist())) / k)
        by_prior.append(len(best & set(np.argsort(-b)[:k].tolist())) / k)
    return {"tau": np.array(tau), "sd": np.array(sd), "answers": float(np.mean(by_answers)),
            "prior": float(np.mean(by_prior))}


def first_pass_tau(out: Path, m: int = 20, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per comparison setting (the simulated ones, seed ``seed``, and minilm) and dataset: the mean Kendall tau
    between the presented (BM25) order and the answer over the first pass's windows."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from method_comparison import DATASETS, SETTINGS, dataset_files

    from acurank_cli.records import RerankRequest
    from acurank_cli.rerankers.backends.minilm import MiniLMReranker
    from acurank_cli.rerankers.backends.simulated import simulated_order
    from acurank_cli.run.inputs import InputSpec

    def tau(order) -> float:
        return stats.kendalltau(range(len(order)), order).statistic

    flags = {name: dict(zip(f[::2], map(float, f[1::2]))) for name, f in SETTINGS.items()}
    table: dict[str, dict[str, float]] = {name: {} for name in [*SETTINGS, "minilm"]}
    minilm = MiniLMReranker()
    for ds in DATASETS:
        files = dataset_files(out, ds)
        inputs = InputSpec(run=str(files["run"]), depth=100, topics=str(files["topics"]), corpus=str(files["corpus"]),
                           qrels=str(files["qrels"])).load(True)
        windows = []  # (task, docids as presented: disjoint windows of m down the BM25 order)
        for task in inputs.tasks:
            ranked = [c.docid for c in sorted(task.candidates, key=lambda c: -c.score)]
            windows += [(task, ranked[s:s + m]) for s in range(0, len(ranked), m) if len(ranked[s:s + m]) >= 2]
        for name, f in flags.items():
            table[name][ds] = float(np.mean([tau(simulated_order(
                t.qid, w, inputs.qrels.get(t.qid, {}), f.get("--sim-noise", 0.0), seed,
                persistent=f.get("--sim-persistent", 0.0), position=f.get("--sim-position", 0.0))) for t, w in windows]))
        answers = minilm.rerank_batch([RerankRequest(t.qid, t.query, tuple(w), tuple(inputs.docs[d] for d in w))
                                       for t, w in windows])
        table["minilm"][ds] = float(np.mean([tau(a.order) for a in answers]))
    return table


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--simulated", type=Path, metavar="OUT", help="also the simulated settings' first-pass tau")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    out = {name: draw(rng, *params, args.n, args.queries) for name, params in WORLDS.items()}
    (a, ra), (b, rb) = out.items()
    lines = [f"Two worlds a method cannot tell apart ({args.queries} queries of {args.n} candidates each, seed "
             f"{args.seed}; `python benchmarks/identifiability.py`)", "",
             "| world | V, se2, su2 | rho | mean tau(b, answers) | mean sd(b) | top-10 overlap: by answers | by prior |",
             "|---|---|---|---|---|---|---|"]
    for name, (v, se2, su2) in WORLDS.items():
        rho = v / np.sqrt((v + se2) * (v + su2))
        r = out[name]
        lines.append(f"| {name} | {v:g}, {se2:g}, {su2:g} | {rho:.4f} | {r['tau'].mean():.4f} | {r['sd'].mean():.4f} "
                     f"| {r['answers']:.3f} | {r['prior']:.3f} |")
    lines += ["", f"What a method sees, A against B (two-sample Kolmogorov-Smirnov): tau p = "
              f"{stats.ks_2samp(ra['tau'], rb['tau']).pvalue:.3f}, sd(b) p = {stats.ks_2samp(ra['sd'], rb['sd']).pvalue:.3f}."]
    if args.simulated:
        table = first_pass_tau(args.simulated)
        datasets = list(next(iter(table.values())))
        lines += ["", "The comparison's settings, first pass: mean Kendall tau between the presented "
                  "(BM25) order and the answer (simulated: seed 0)", "", "| setting | " + " | ".join(datasets) + " |",
                  "|---|" + "---|" * len(datasets)]
        lines += [f"| {name} | " + " | ".join(f"{v:.3f}" for v in row.values()) + " |" for name, row in table.items()]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "identifiability.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
