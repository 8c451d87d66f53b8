"""How often the calibration map's shift warning fires (issue 83, item 3; BENCHMARKS.md 35): on queries of the map's
own collection (a false alarm) and on another collection's (a true one).

A map records its fitting queries' first-stage signals (:mod:`acurank_cli.relevance.shift`: each query's top and
median BM25 score); a run applying it compares its own queries' with them (Mann-Whitney, Bonferroni over the two
signals, alpha 0.01). The warning reads only the first-stage run, so this measures it on the runs alone, through
the same function the CLI calls (:func:`~acurank_cli.relevance.shift.compared`):

- same collection: N = 5, 10, 20, 40 fitting queries drawn at random (50 draws), the rest applied;
- another collection: a map fit on all of one collection's judged queries, and on N of them, applied to all of
  another's.

    PYTHONPATH=. .venv/bin/python benchmarks/shift_alarm.py [--scifact RUN]   (results/shift_alarm.json)

SciFact's BM25 run is not in sample_runs: make it with ``acurank index`` and ``acurank retrieve`` (BENCHMARKS.md 35).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, save, table  # noqa: E402

from acurank_cli.io.runs import read_run  # noqa: E402
from acurank_cli.relevance.shift import by_query, columns, compared  # noqa: E402

DRAWS = 50


def tasks(run, qids) -> list[SimpleNamespace]:
    """The queries ``qids`` of a run as the tasks the CLI compares (a qid and its candidates)."""
    return [SimpleNamespace(qid=q, candidates=run[q]) for q in qids]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scifact", help="a BM25 run of SciFact's 300 test queries")
    args = ap.parse_args()
    runs = {ds: read_run(str(ROOT / "sample_runs" / ds / "bm25.run")) for ds in ("dl19", "dl20", "dl23")}
    if args.scifact:
        runs["scifact"] = read_run(args.scifact)
    rng = random.Random(0)
    rows = []
    for name, run in runs.items():
        qids = sorted(run)
        sig = by_query(tasks(run, qids))
        for n in (5, 10, 20, 40):
            if n > len(qids) - 5:
                continue
            fired = 0
            for _ in range(DRAWS):
                fit = set(rng.sample(qids, n))
                shift = compared({"signals": columns(sig[q] for q in qids if q in fit)},
                                 tasks(run, [q for q in qids if q not in fit]))
                fired += bool(shift and shift.shifted)
            rows.append({"map": name, "N": n, "applied to": f"{name} (the rest)", "fired": f"{fired}/{DRAWS}"})
        for other, orun in runs.items():
            if other == name:
                continue
            for n in (5, 10, 20, 40, len(qids)):
                if n > len(qids):
                    continue
                draws = 1 if n == len(qids) else DRAWS
                fired, ps = 0, []
                for _ in range(draws):
                    fit = set(rng.sample(qids, n))
                    shift = compared({"signals": columns(sig[q] for q in qids if q in fit)}, tasks(orun, sorted(orun)))
                    fired += bool(shift and shift.shifted)
                    ps.append(shift.p)
                rows.append({"map": name, "N": n, "applied to": other, "fired": f"{fired}/{draws}",
                             "p (median)": f"{sorted(ps)[len(ps) // 2]:.2g}"})
    save("shift_alarm", {"rows": rows, "draws": DRAWS})
    print(table(rows, ["map", "N", "applied to", "fired", "p (median)"]))


if __name__ == "__main__":
    main()
