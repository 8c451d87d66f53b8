"""The speed guard (issue 85): whole-process timings of runs against loopback servers with set latencies, printed as
ratios beside their targets. Run it before and after a change that touches the driver, the lanes, the transport or
start-up (`make bench-latency`; docs/contributing.md), on a quiet machine (it prints the load average it saw).

Cases, each a real ``acurank`` process (the start-up counted, as a user's run counts it):

- ``start``: ``acurank --version`` and ``acurank rerank --help``, the median of 5 (target <= 0.45 s).

Every case runs once unmeasured first (each method), as a user's second run would: Python's bytecode and numba's
compiled kernels cached beside the source. Comparing two commits, run each from its own worktree with
``--acurank "env PYTHONPATH=WORKTREE python -m acurank_cli"`` from a folder that holds no ``acurank_cli`` (``python -m``
puts the current folder first on the path), and alternate them: single medians drift with the machine by 0.1 s.
- ``1 server``: ``benchmarks/stragglers.py``'s case: 24 DL19 queries, a server answering each prompt after 0.5 s x a
  lognormal factor (sd 0.3; ``--full`` adds acurank at sd 0.8, about 200 s), 8 slots; wall over the ideal (the
  seconds slept over the slots; target <= 1.10).
- ``3 servers``: acurank-auto-9 ``--beta-pool query``, 43 queries, sd 0.5, three servers of 8 slots (target <= 1.35).
- ``latency``: acurank-9 and sw-1 on 6 DL20 queries, every reply after 200 ms, ``--concurrency 8``, ``--batch-queries
  1``: the whole process's wall a query, and the ratio acurank-9 / sw-1 (target <= 0.40; rounds x 0.2 s is the
  floor); the median of the stats' per-query seconds too (the start-up left out), and how much of the wall is start-up
  (the same run against a server answering at once).

    PYTHONPATH=. python benchmarks/latency_guard.py [--acurank 'python -m acurank_cli'] [--full] [--repeat 3]

Writes benchmarks/results/latency_guard.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import save, start_chat_server, subset_run
from stragglers import ENV, measure, reverse

TARGETS = {"start": 0.45, "1 server": 1.10, "3 servers": 1.35, "latency": 0.40}


def _median_wall(command: list[str], repeat: int = 5) -> float:
    walls = []
    for _ in range(repeat + 1):  # the first unmeasured: bytecode cached, as a user's installed copy has it
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, env=ENV, check=True)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls[1:])


def start(acurank: list[str]) -> list[dict]:
    return [{"case": "start", "what": " ".join(args), "value": round(_median_wall([*acurank, *args]), 3),
             "target": TARGETS["start"]} for args in (["--version"], ["rerank", "--help"])]


def stragglers(acurank: list[str], folder: Path, full: bool) -> list[dict]:
    rows = []
    run, _ = subset_run("dl19", 24, folder / "dl19-24")
    # unmeasured, each method once: the bytecode and numba's compiled kernels cached (a fresh checkout's first
    # acurank-auto-9 run compiles its kernels: 3 s more, which read as a loss of 0.3x in the 3-server ratio)
    for method in ("sw-1", "acurank-9", "acurank", "acurank-auto-9"):
        measure(acurank, run, method, 0.001, 0.0, 8, folder, [])
    cases = [("acurank-9", 0.3), ("sw-1", 0.3)] + ([("acurank", 0.8)] if full else [])
    for method, sd in cases:
        r = measure(acurank, run, method, 0.5, sd, 8, folder, [])
        rows.append({"case": "1 server", "what": f"{method} sd {sd}", "value": r["ratio"], "target": TARGETS["1 server"],
                     "wall_s": r["wall_s"], "ideal_s": r["ideal_s"], "run_sha256": r["run_sha256"]})
    run43, _ = subset_run("dl19", 43, folder / "dl19-43")
    r = measure(acurank, run43, "acurank-auto-9", 0.5, 0.5, 8, folder, ["--beta-pool", "query"], servers=3)
    rows.append({"case": "3 servers", "what": "acurank-auto-9 --beta-pool query sd 0.5", "value": r["ratio"],
                 "target": TARGETS["3 servers"], "wall_s": r["wall_s"], "ideal_s": r["ideal_s"],
                 "run_sha256": r["run_sha256"]})
    return rows


def _latency_run(acurank: list[str], run: Path, method: str, delay: float, folder: Path) -> dict:
    httpd, state, _ = start_chat_server(delay, reverse)
    out = folder / f"{method}.{delay}.run"
    started = time.perf_counter()
    done = subprocess.run([*acurank, "rerank", str(run), "--method", method, "--reranker", "openai:bench",
                           "--base-url", f"http://127.0.0.1:{httpd.server_address[1]}/v1", "--concurrency", "8",
                           "--batch-queries", "1", "--no-cache", "--quiet", "-o", str(out), "--overwrite"],
                          capture_output=True, text=True, env=ENV, timeout=600)
    wall = time.perf_counter() - started
    httpd.shutdown()
    if done.returncode != 0:
        raise SystemExit(f"{method}: {done.stderr.strip()[-500:]}")
    stats = [json.loads(line) for line in out.with_suffix(".stats.jsonl").read_text().splitlines()]
    return {"wall_s": wall, "queries": len(stats), "rounds": sum(len(r["iterations"]) for r in stats),
            "median_query_s": statistics.median(r["seconds"] for r in stats)}


def latency(acurank: list[str], folder: Path, repeat: int) -> list[dict]:
    run, _ = subset_run("dl20", 6, folder / "dl20-6")
    for method in ("sw-1", "acurank-9"):  # unmeasured: caches warm
        _latency_run(acurank, run, method, 0.001, folder)
    per: dict[str, dict] = {}
    for method in ("acurank-9", "sw-1"):
        walls, medians, zero = [], [], []
        for _ in range(repeat):
            r = _latency_run(acurank, run, method, 0.2, folder)
            walls.append(r["wall_s"] / r["queries"])
            medians.append(r["median_query_s"])
            zero.append(_latency_run(acurank, run, method, 0.001, folder)["wall_s"] / r["queries"])
        per[method] = {"wall_per_query_s": statistics.median(walls), "median_query_s": statistics.median(medians),
                       "floor_per_query_s": r["rounds"] * 0.2 / r["queries"],
                       "no_latency_per_query_s": statistics.median(zero)}
    rows = [{"case": "latency", "what": f"{m} wall a query", "value": round(v["wall_per_query_s"], 3), "target": "",
             "floor_s": round(v["floor_per_query_s"], 3), "median_query_s": round(v["median_query_s"], 3),
             "no_latency_s": round(v["no_latency_per_query_s"], 3)} for m, v in per.items()]
    a, s = per["acurank-9"], per["sw-1"]
    rows.append({"case": "latency", "what": "acurank-9 / sw-1 (whole process)", "target": TARGETS["latency"],
                 "value": round(a["wall_per_query_s"] / s["wall_per_query_s"], 3)})
    rows.append({"case": "latency", "what": "acurank-9 / sw-1 (per-query seconds, start-up out)", "target": "",
                 "value": round(a["median_query_s"] / s["median_query_s"], 3)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--acurank", default=f"{sys.executable} -m acurank_cli", help="the command to time")
    ap.add_argument("--full", action="store_true", help="also acurank at sd 0.8 on one server (about 200 s)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each latency case (the median is shown)")
    ap.add_argument("--name", default="latency_guard")
    args = ap.parse_args()
    acurank = shlex.split(args.acurank)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        rows = start(acurank) + stragglers(acurank, Path(tmp), args.full) + latency(acurank, Path(tmp), args.repeat)
    print(f"load average at start {load:.2f} (quote figures from a quiet machine: under 1 on 2 cores)")
    for r in rows:
        extra = ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("case", "what", "value", "target"))
        target = f"  (target <= {r['target']})" if r["target"] != "" else ""
        print(f"{r['case']:<10} {r['what']:<52} {r['value']:>7}{target}{'  ' + extra if extra else ''}")
    save(args.name, {"load_average": load, "command": args.acurank, "rows": rows})


if __name__ == "__main__":
    main()
