"""The query-set budget against acurank-9 at equal mean calls, from the comparison's runs.

    python benchmarks/set_budget_report.py OUT      # OUT: what benchmarks/method_comparison.py wrote

Per setting (simulated noise 0, 0.5, 1, seeds averaged per query; minilm) and dataset: nDCG@10 and calls per
query of ``acurank --budget-total 9x`` and ``acurank-9``, the difference and its paired t-test over queries
(seed-averaged per-query nDCG@10), and sw-1 / blitz-k20 for scale.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from method_comparison import DATASETS, collect, folder  # noqa: E402

from acurank_cli.report.significance import paired_ttest  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    seeds = [0, 1, 2]
    settings = [s for s in ("noise 0", "noise 0.5", "noise 1", "minilm")
                if folder(out, s, None if s == "minilm" else seeds[0]).is_dir()]
    datasets = [d for d in DATASETS if all((folder(out, s, None if s == "minilm" else seeds[0]) / d).is_dir()
                                           for s in settings)]
    result = collect(out, settings, seeds, datasets)
    print("| setting | dataset | set-9x nDCG@10 | calls | acurank-9 nDCG@10 | calls | diff | p (paired t) | sw-1 | blitz-k20 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for group, by_ds in result.items():
        for ds in datasets:
            a, b = by_ds[ds]["acurank --budget-total 9x"], by_ds[ds]["acurank-9"]
            qids = sorted(b["ndcg"])
            t = paired_ttest([a["ndcg"][q] for q in qids], [b["ndcg"][q] for q in qids])
            ma, mb = statistics.mean(a["ndcg"].values()), statistics.mean(b["ndcg"].values())
            sw, bl = (statistics.mean(by_ds[ds][m]["ndcg"].values()) for m in ("sw-1", "blitz-k20"))
            print(f"| {group} | {ds} | {ma:.4f} | {a['calls']:.2f} | {mb:.4f} | {b['calls']:.2f} | {ma - mb:+.4f} | "
                  f"{t.pvalue:.3g} | {sw:.4f} | {bl:.4f} |")


if __name__ == "__main__":
    main()
