"""Thinking off, on, and gated at several thresholds: nDCG@10 against thinking tokens, simulated (BENCHMARKS.md 19).

The simulated reranker's thinking model is an assumption (docs/thinking.md): a window answered while thinking has
its noise multiplied by ``--sim-think-noise`` and costs ``--sim-think-tokens`` thought tokens. Every figure here is
that simulation's, not a real model's.

    python benchmarks/thinking.py [--datasets dl19,dl20] [--method acurank] [--noise 2.0] [--seeds 1]
        [--thresholds 0.4 0.5 ...] [--shares 0.5 ...] [--name thinking] [--plot docs/thinking-pareto.png]

``--shares X ...``: gated thinking under a per-query budget (``--think-share X``: at most that share of a query's
windows think, the most unsettled first), beside the thresholds (``--thresholds`` with no value: none);
``--token-shares X ...``: a budget in thought tokens (``--think-tokens``) set to X times on's mean thought tokens a
query on the same data and seed (what "half of on's tokens" is as a budget a user sets).

``--seeds N``: each setting run with the simulated reranker's seeds 0 .. N-1 (``--sim-seed``) and its figures
averaged over them (a share of the gain on 43 or 54 queries moves by a few points from one noise draw to another);
the table adds the per-seed shares' range and the standard error of their mean (how far the averaged share may sit
from the share an unlimited number of draws would give). One seed (the default) is the reranker's default seed.

Prints a table per dataset and writes benchmarks/results/NAME.json (``--name``, default ``thinking``; and the Pareto
plot when asked).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THRESHOLDS = (0.3, 0.4, 0.45, 0.5, 0.6, 0.7, 0.9, 1.0)


def label(thinking: str, above: float | None, share: float | None = None, tokens: float | None = None) -> str:
    if tokens is not None:
        return f"tokens {tokens:g}"
    if share is not None:
        return f"share {share:g}"
    return thinking if above is None else f"gated {above:g}"


def run(ds: str, method: str, noise: float, thinking: str, above: float | None, out: Path,
        seed: int | None = None, share: float | None = None, tokens: int | None = None, token_share: float | None = None
        ) -> dict:
    """One run through the API's composition root (the CLI's rerank), its nDCG@10 and its tokens a query."""
    from acurank_cli.cli.app import main
    from acurank_cli.evaluation import evaluate
    from acurank_cli.io.collection_files import read_qrels
    from acurank_cli.io.runs import read_run

    sample = ROOT / "sample_runs" / ds
    args = ["rerank", str(sample / "bm25.run"), "--method", method, "--reranker", "simulated", "--qrels",
            str(sample / "qrels.txt"), "--sim-noise", str(noise), "--no-cache", "--quiet", "--overwrite",
            "-o", str(out), "--thinking", thinking]
    if above is not None:
        args += ["--think-above", str(above)]
    if share is not None:  # a per-query budget: this share of the windows, the most unsettled first
        args += ["--think-share", str(share)]
    if tokens is not None:  # a per-query budget in thought tokens, spent from the first step on
        args += ["--think-tokens", str(tokens)]
    if seed is not None:
        args += ["--sim-seed", str(seed)]
    if main(args) != 0:
        raise SystemExit(f"failed: {' '.join(args)}")
    qrels = read_qrels(sample / "qrels.txt")
    ndcg = evaluate(read_run(out).scores(), qrels, ["nDCG@10"]).mean("nDCG@10")
    stats = [json.loads(line) for line in open(out.with_suffix(".stats.jsonl"))]
    n = len(stats)
    return {"dataset": ds, "thinking": label(thinking, above, share, token_share), "ndcg10": ndcg,
            "calls": round(sum(r["calls"] for r in stats) / n, 2),
            "thinking_calls": round(sum(r.get("thinking_calls") or 0 for r in stats) / n, 2),
            "thinking_tokens": round(sum(r.get("reasoning_tokens") or 0 for r in stats) / n, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="dl19,dl20")
    ap.add_argument("--method", default="acurank")
    ap.add_argument("--noise", type=float, default=2.0)
    ap.add_argument("--seeds", type=int, default=1, help="average over the simulated reranker's seeds 0 .. N-1")
    ap.add_argument("--thresholds", type=float, nargs="*", default=list(THRESHOLDS), help="--think-above values")
    ap.add_argument("--shares", type=float, nargs="*", default=[], help="--think-share values (a per-query budget)")
    ap.add_argument("--token-shares", type=float, nargs="*", default=[],
                    help="--think-tokens set to this share of on's mean thought tokens a query (same data and seed)")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--name", default="thinking", help="writes benchmarks/results/NAME.json")
    a = ap.parse_args()
    seeds = [None] if a.seeds <= 1 else list(range(a.seeds))
    settings = ([("off", None, None, None), ("on", None, None, None)] + [("gated", t, None, None) for t in a.thresholds]
                + [("gated", None, x, None) for x in a.shares] + [("gated", None, None, x) for x in a.token_shares])
    per_seed: dict[tuple, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for ds in a.datasets.split(","):
            for seed in seeds:
                on_tokens = None
                for thinking, above, share, token_share in settings:
                    tokens = None if token_share is None else max(1, int(token_share * on_tokens))
                    row = run(ds, a.method, a.noise, thinking, above, Path(tmp) / f"{ds}.{thinking}.{above}.run", seed,
                              share, tokens, token_share)
                    if thinking == "on":
                        on_tokens = row["thinking_tokens"]
                    per_seed.setdefault((ds, row["thinking"]), []).append(row)
    rows = []
    for ds in a.datasets.split(","):
        mine = []
        for thinking, above, share, token_share in settings:
            runs = per_seed[(ds, label(thinking, above, share, token_share))]
            mine.append({**runs[0], **{key: sum(r[key] for r in runs) / len(runs)
                                       for key in ("ndcg10", "calls", "thinking_calls", "thinking_tokens")},
                         "seeds": len(runs)})
        off, on = mine[0], mine[1]
        gain = on["ndcg10"] - off["ndcg10"]
        spread = len(seeds) > 1
        print(f"\n{ds} ({a.method}, simulated noise {a.noise:g}, thinking noise x0.5, 1,000 tokens a thought"
              + (f", mean of seeds 0-{len(seeds) - 1})" if spread else ")"))
        print("| thinking | nDCG@10 | calls/q | thinking calls/q | thinking tokens/q | share of on's gain | share of on's tokens |"
              + (" per-seed gain share: range | its mean's s.e. |" if spread else ""))
        print("|---|---|---|---|---|---|---|" + ("---|---|" if spread else ""))
        for r in mine:
            share = (r["ndcg10"] - off["ndcg10"]) / gain if gain else float("nan")
            tokens = r["thinking_tokens"] / on["thinking_tokens"] if on["thinking_tokens"] else 0.0
            r.update(gain_share=round(share, 4), token_share=round(tokens, 4))
            line = (f"| {r['thinking']} | {r['ndcg10']:.4f} | {r['calls']:.2f} | {r['thinking_calls']:.2f} | "
                    f"{r['thinking_tokens']:.0f} | {share:.1%} | {tokens:.1%} |")
            if spread:
                runs = per_seed[(ds, r["thinking"])]
                shares = [(x["ndcg10"] - o["ndcg10"]) / (n["ndcg10"] - o["ndcg10"])
                          for x, o, n in zip(runs, per_seed[(ds, "off")], per_seed[(ds, "on")])]
                se = statistics.stdev(shares) / math.sqrt(len(shares))
                r.update(gain_share_range=[round(min(shares), 3), round(max(shares), 3)], gain_share_se=round(se, 4))
                line += f" {min(shares):.0%}-{max(shares):.0%} | {se:.1%} |"
            print(line)
        rows += [{**r, **{key: round(r[key], 4 if key == "ndcg10" else 2)
                          for key in ("ndcg10", "calls", "thinking_calls", "thinking_tokens")}} for r in mine]
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / f"{a.name}.json").write_text(json.dumps({"method": a.method, "shares": a.shares,
                                                       "token_shares": a.token_shares, "noise": a.noise, "seeds": len(seeds),
                                                       "rows": rows}, indent=1))
    if a.plot:
        plot(rows, a.plot)
    return 0


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for ds, marker in zip(sorted({r["dataset"] for r in rows}), "os^"):
        mine = [r for r in rows if r["dataset"] == ds]
        ax.plot([r["thinking_tokens"] for r in mine[2:]], [r["ndcg10"] for r in mine[2:]], marker + "-",
                label=f"{ds} gated")
        for r in mine:
            if r["thinking"] not in ("off", "on", "gated 0.3", "gated 0.5", "gated 0.7", "gated 1"):
                continue
            ax.annotate(r["thinking"], (r["thinking_tokens"], r["ndcg10"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.plot([mine[0]["thinking_tokens"], mine[1]["thinking_tokens"]], [mine[0]["ndcg10"], mine[1]["ndcg10"]],
                marker, color="grey", linestyle=":", label=f"{ds} off / on")
    ax.set_xlabel("thinking tokens per query (simulated)")
    ax.set_ylabel("nDCG@10")
    ax.set_title("Gated thinking (AcuRank, simulated reranker)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
