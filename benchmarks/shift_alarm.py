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

``--absolute WORK`` asks whether the backend's own score would tell more (issue 83, item 3: "the backend's own
absolute score where it has one"): the same test on each query's top and median MiniLM cosine to its candidates in
place of its BM25 scores (the cosines MiniLM gives, ``benchmarks/relevance.py``'s, kept in WORK), on the three TREC
DL years (results/shift_alarm_absolute.json).
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
from acurank_cli.relevance.shift import _compared, by_query, columns  # noqa: E402

DRAWS = 50


def tasks(run, qids) -> list[SimpleNamespace]:
    """The queries ``qids`` of a run as the tasks the CLI compares (a qid and its candidates)."""
    return [SimpleNamespace(qid=q, candidates=run[q]) for q in qids]


def absolute_signals(work: Path) -> dict[str, dict[str, tuple[float, ...]]]:
    """Each DL year's queries' (top, median) MiniLM cosine to their candidates and their count, by qid: the rows
    :func:`~acurank_cli.relevance.shift.by_query` makes of first-stage scores, made of the backend's own."""
    import statistics

    import relevance as bench  # benchmarks/relevance.py: MiniLM's cosines, made once into WORK

    out = {}
    for ds in ("dl19", "dl20", "dl23"):
        out[ds] = {q: (max(c.values()), statistics.median(c.values()), len(c))
                   for q, c in bench.cosines(ds, work).items()}
    return out


def shift_of(fit_rows, here_rows):
    """The CLI's test (:func:`~acurank_cli.relevance.shift.compared`, each side at least 5 queries here) of the
    queries ``here_rows`` against the map's fitting queries ``fit_rows``."""
    return _compared(columns(fit_rows), columns(here_rows))


def alarms(signals: dict[str, dict[str, tuple[float, ...]]], rng: random.Random) -> list[dict]:
    """Per map (a collection, N of its queries drawn): fired of :data:`DRAWS` on the rest of its own queries, and on
    all of each other collection's (all its queries: one draw, and its p)."""
    rows = []
    for name, sig in signals.items():
        qids = sorted(sig)
        for n in (5, 10, 20, 40):
            if n > len(qids) - 5:
                continue
            fired = 0
            for _ in range(DRAWS):
                fit = set(rng.sample(qids, n))
                fired += shift_of([sig[q] for q in qids if q in fit], [sig[q] for q in qids if q not in fit]).shifted
            rows.append({"map": name, "N": n, "applied to": f"{name} (the rest)", "fired": f"{fired}/{DRAWS}"})
        for other, osig in signals.items():
            if other == name:
                continue
            for n in (5, 10, 20, 40, len(qids)):
                if n > len(qids):
                    continue
                draws = 1 if n == len(qids) else DRAWS
                fired, ps = 0, []
                for _ in range(draws):
                    fit = set(rng.sample(qids, n))
                    shift = shift_of([sig[q] for q in qids if q in fit], [osig[q] for q in sorted(osig)])
                    fired += shift.shifted
                    ps.append(shift.p)
                rows.append({"map": name, "N": n, "applied to": other, "fired": f"{fired}/{draws}",
                             "p (median)": f"{sorted(ps)[len(ps) // 2]:.2g}"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scifact", help="a BM25 run of SciFact's 300 test queries")
    ap.add_argument("--absolute", type=Path, metavar="WORK",
                    help="test MiniLM's cosines in place of BM25's scores (made once into WORK)")
    args = ap.parse_args()
    if args.absolute:
        args.absolute.mkdir(parents=True, exist_ok=True)
        rows = alarms(absolute_signals(args.absolute), random.Random(0))
        save("shift_alarm_absolute", {"rows": rows, "draws": DRAWS, "signals": "MiniLM cosine: top, median"})
    else:
        runs = {ds: read_run(str(ROOT / "sample_runs" / ds / "bm25.run")) for ds in ("dl19", "dl20", "dl23")}
        if args.scifact:
            runs["scifact"] = read_run(args.scifact)
        rows = alarms({ds: by_query(tasks(run, sorted(run))) for ds, run in runs.items()}, random.Random(0))
        save("shift_alarm", {"rows": rows, "draws": DRAWS})
    print(table(rows, ["map", "N", "applied to", "fired", "p (median)"]))


if __name__ == "__main__":
    main()
