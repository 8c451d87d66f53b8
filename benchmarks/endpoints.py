"""Scale-out over several endpoints: seconds per query with 1, 2 and 4 replicas, and a replica killed mid-run.

Each endpoint is a real server process on loopback (benchmarks/serial_server.py) that answers one
request at a time in a fixed ``--delay`` (0.2 s): a GPU replica without batching. ``acurank rerank``
(acurank, DL19's first ``--queries`` queries, ``--batch-queries`` = that count, ``--concurrency 1``
per endpoint, no call cache) runs against 1, 2 and 4 endpoints; then against 2, one of which is
SIGKILLed after a quarter of the reference run's requests. Writes benchmarks/results/endpoints.json.

    PYTHONPATH=. python benchmarks/endpoints.py [--queries 8] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import subset_run

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "benchmarks" / "serial_server.py"
RESULTS = ROOT / "benchmarks" / "results" / "endpoints.json"


def start(delay: float, log: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--delay", str(delay), "--log", str(log)],
                            stdout=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline().split()[1])}/v1"


def lines(log: Path, what: str) -> list[str]:
    return [l.split()[1] for l in log.read_text().splitlines() if l.startswith(what + " ")] if log.exists() else []


def command(run: Path, urls: list[str], out: Path, queries: int) -> list[str]:
    return [sys.executable, "-m", "acurank_cli", "rerank", str(run), "--method", "acurank", "--reranker", "openai:replica",
            *[x for u in urls for x in ("--base-url", u)], "--concurrency", "1", "--batch-queries", str(queries),
            "--no-cache", "--output", str(out), "--overwrite", "--quiet"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acurank-endpoints-"))
    run, qids = subset_run("dl19", args.queries, tmp)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # loopback: no key
    rows = []
    reference = None
    for n in (1, 2, 4):
        servers = [start(args.delay, tmp / f"n{n}-{i}.log") for i in range(n)]
        out = tmp / f"n{n}.run"
        t0 = time.perf_counter()
        subprocess.run(command(run, [u for _, u in servers], out, args.queries), check=True, env=env,
                       stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        for proc, _ in servers:
            proc.kill()
        served = [len(lines(tmp / f"n{n}-{i}.log", "done")) for i in range(n)]
        if reference is None:
            reference = out.read_text()
        rows.append({"endpoints": n, "wall_s": round(wall, 2), "s_per_query": round(wall / args.queries, 3),
                     "requests": sum(served), "per_endpoint": served, "same_output": out.read_text() == reference})
        print(f"{n} endpoint(s): {wall:.1f} s, {wall / args.queries:.2f} s/query, requests per endpoint {served}")

    # two endpoints, one killed after a quarter of the requests
    logs = [tmp / "kill-0.log", tmp / "kill-1.log"]
    servers = [start(args.delay, log) for log in logs]
    out = tmp / "kill.run"
    t0 = time.perf_counter()
    proc = subprocess.Popen(command(run, [u for _, u in servers], out, args.queries), env=env, stderr=subprocess.PIPE,
                            text=True)
    quarter = rows[0]["requests"] // 4
    while proc.poll() is None and not (len(lines(logs[1], "done")) + len(lines(logs[0], "done")) >= quarter
                                       and len(lines(logs[1], "recv")) > len(lines(logs[1], "done"))):
        time.sleep(0.002)
    servers[1][0].send_signal(signal.SIGKILL)
    servers[1][0].wait()
    in_flight = len(lines(logs[1], "recv")) - len(lines(logs[1], "done"))
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    servers[0][0].kill()
    paid = lines(logs[0], "recv") + lines(logs[1], "recv")
    kill_row = {"endpoints": 2, "killed": 1, "exit": proc.returncode, "wall_s": round(wall, 2),
                "s_per_query": round(wall / args.queries, 3), "same_output": out.read_text() == reference,
                "paid": len(paid), "distinct": len(set(paid)), "in_flight_at_kill": in_flight,
                "served_after": [len(lines(log, "done")) for log in logs], "summary": err.strip().splitlines()[-1]}
    print(f"2 endpoints, one killed after {quarter} requests: exit {proc.returncode}, {wall:.1f} s, "
          f"same output {kill_row['same_output']}, paid {len(paid)} <= distinct {len(set(paid))} + in flight {in_flight}")
    result = {"machine": f"{platform.machine()}, {platform.python_version()}", "queries": qids, "delay_s": args.delay,
              "method": "acurank", "rows": rows, "killed": kill_row}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
