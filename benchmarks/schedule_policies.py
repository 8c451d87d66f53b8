"""Replays a measured stragglers run under other schedules: how close any order of sending could come to the ideal.

Reads rows of ``benchmarks/stragglers.py --log-requests`` (each request's latency and query, each query's steps),
and simulates the same windows with the same latencies on the same slots under several policies. A query's step is
sent when its previous step is wholly answered; a free slot takes the waiting window its policy ranks first. Start-up,
the run's own CPU time and the gap between an answer and the next request are left out: the figure is the schedule's
own span over the ideal (the seconds slept over the slots), a floor for the whole process's ratio.

Policies that do not know a window's latency before it is answered (what acurank can do), and one that does:

- ``fewest steps first``: acurank's (the query that has waited the fewest times, then input order);
- ``first released``: first come, first served;
- ``query order``: each query's steps before the next query's (depth first);
- ``most steps first``: the queries furthest along first;
- ``random``;
- ``clairvoyant``: the window whose query has the longest remaining chain of known latencies first (a bound, not
  a policy anyone can run: it reads the latencies before sending).

    python benchmarks/schedule_policies.py [benchmarks/results/stragglers-3servers-draws.json]

Prints a table (span / ideal per policy and sd, over every draw: total span over total ideal) and writes
benchmarks/results/schedule_policies.json.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import json
import random
import sys
from pathlib import Path

from common import save

ROOT = Path(__file__).resolve().parent.parent


def chains(row: dict) -> list[list[list[float]]]:
    """Per query (input order), per step, the latencies of its windows, from the row's request log."""
    by_query: dict[int, list[tuple[float, float]]] = collections.defaultdict(list)
    for entry in row["requests_log"]:
        start, seconds, place = entry.split()
        by_query[int(place)].append((float(start), float(seconds)))
    out = []
    for place, (qid, _, steps) in enumerate(row["steps"]):
        sent = sorted(by_query.pop(place, []))
        if len(sent) != sum(steps):
            raise SystemExit(f"query {qid}: {len(sent)} requests logged, its stats say {sum(steps)}")
        latencies = [seconds for _, seconds in sent]
        rounds, at = [], 0
        for n in steps:
            if n:
                rounds.append(latencies[at:at + n])
            at += n
        out.append(rounds)
    if by_query:
        raise SystemExit(f"{len(by_query)} logged queries not in the run's stats")
    return out


def span(queries: list[list[list[float]]], slots: int, rank) -> float:
    """The schedule's end when every free slot takes the waiting window ``rank`` puts first:
    ``rank(query, step, window, released_at)`` -> a sortable key, lower first."""
    waiting: list = []
    running: list = []
    left: dict[int, int] = {}
    step = [0] * len(queries)
    serial = 0

    def release(q: int, at: float) -> None:
        nonlocal serial
        for j, seconds in enumerate(queries[q][step[q]]):
            heapq.heappush(waiting, (rank(q, step[q], j, at), serial, q, seconds))
            serial += 1
        left[q] = len(queries[q][step[q]])

    for q in range(len(queries)):
        if queries[q]:
            release(q, 0.0)
    now, free, end = 0.0, slots, 0.0
    while waiting or running:
        while free and waiting:
            _, _, q, seconds = heapq.heappop(waiting)
            heapq.heappush(running, (now + seconds, q))
            free -= 1
        now, q = heapq.heappop(running)
        free += 1
        end = max(end, now)
        left[q] -= 1
        if not left[q]:
            step[q] += 1
            if step[q] < len(queries[q]):
                release(q, now)
    return end


def policies(queries: list[list[list[float]]], seed: int = 0) -> dict:
    draw = random.Random(seed)
    remaining = [[sum(max(r) for r in q[i:]) for i in range(len(q))] for q in queries]
    return {
        "fewest steps first (acurank)": lambda q, s, j, at: (s, q),
        "first released": lambda q, s, j, at: (at,),
        "query order": lambda q, s, j, at: (q, s),
        "most steps first": lambda q, s, j, at: (-s, q),
        "random": lambda q, s, j, at: (draw.random(),),
        "clairvoyant (a bound)": lambda q, s, j, at: (-remaining[q][s], -queries[q][s][j]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default=str(ROOT / "benchmarks" / "results" / "stragglers-3servers-draws.json"))
    args = ap.parse_args()
    data = json.loads(Path(args.results).read_text())
    slots = data["concurrency"] * data["servers"]
    totals: dict = collections.defaultdict(lambda: [0.0, 0.0, 0.0, []])  # (sd, policy) -> span, ideal, wall, ratios
    for row in data["rows"]:
        if "requests_log" not in row:
            raise SystemExit(f"{args.results}: no request log (run benchmarks/stragglers.py with --log-requests)")
        queries = chains(row)
        ideal = sum(sum(sum(r) for r in q) for q in queries) / slots
        for name, rank in policies(queries, row.get("draw", 0)).items():
            t = totals[(row["sd"], name)]
            end = span(queries, slots, rank)
            t[0] += end
            t[1] += ideal
            t[2] += row["wall_s"]
            t[3].append(end / ideal)
    out = []
    print(f"{data['servers']} servers x {data['concurrency']} slots, {data['queries']} queries, "
          f"{len({r.get('draw', 0) for r in data['rows']})} latency draws")
    print("| sd | policy | span / ideal (all draws) | per draw | measured wall / ideal |")
    print("|---|---|---|---|---|")
    for (sd, name), (end, ideal, wall, ratios) in totals.items():
        out.append({"sd": sd, "policy": name, "span_over_ideal": round(end / ideal, 3),
                    "per_draw": [round(r, 3) for r in ratios], "measured_wall_over_ideal": round(wall / ideal, 3)})
        print(f"| {sd:g} | {name} | {end / ideal:.3f} | {' '.join(f'{r:.2f}' for r in ratios)} | {wall / ideal:.3f} |")
    save("schedule_policies", {"source": Path(args.results).name, "slots": slots, "rows": out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
