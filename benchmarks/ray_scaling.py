"""Ray scaling: windows per second with 1, 2 and 4 actors over a backend that takes a fixed time a window.

A cluster is started as a user starts one (`ray start --head`, every node on 127.0.0.1, 8 logical CPUs so four
one-CPU actors fit on this 2-core machine: the backend waits, it does not compute); a loopback chat server answers
every window after ``--delay`` seconds; each actor runs ``openai:`` with one request in flight, so an actor
executes one window at a time and N actors at most N. ``acurank baseline --method sw-1`` on the first ``--queries``
DL19 queries (9 windows each) with ``--ray ADDRESS --actors N``; throughput is windows over the time from the first
window sent to the last answered (the actors' start-up left out; the whole wall time is shown too). Prints a table and writes
benchmarks/results/ray_scaling.json.

    PYTHONPATH=. python benchmarks/ray_scaling.py [--queries 16] [--delay 0.2] [--actors 1 2 4] [--cache]
        [--acurank "python -m acurank_cli"] [--name ray_scaling]
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import save, start_chat_server, subset_run, table

ENV = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
RAY = str(Path(sys.executable).with_name("ray"))


def reverse(user: str):
    n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
    return " > ".join(f"[{i}]" for i in range(n, 0, -1)), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--cache", action="store_true", help="each run with a call cache of its own (else --no-cache)")
    ap.add_argument("--acurank", default=f"{sys.executable} -m acurank_cli", help="the command to time")
    ap.add_argument("--name", default="ray_scaling")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([RAY, "start", "--head", f"--port={port}", "--num-cpus=8", "--include-dashboard=false",
                    "--disable-usage-stats"], check=True, capture_output=True, env=ENV, timeout=180)
    httpd, state, lock = start_chat_server(args.delay, reverse)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run, _ = subset_run("dl19", args.queries, Path(tmp) / "in")
            for n in args.actors:
                before = state["requests"]
                state.pop("first", None)
                out = Path(tmp) / f"{n}.run"
                started = time.perf_counter()
                cache = ["--cache", str(Path(tmp) / f"{n}.sqlite")] if args.cache else ["--no-cache"]
                done = subprocess.run([*shlex.split(args.acurank), "baseline", str(run), "--method", "sw-1",
                                       "--reranker", "openai:bench", "--base-url", url, "--concurrency", "1",
                                       *cache, "--quiet", "--ray", f"127.0.0.1:{port}", "--actors", str(n),
                                       "-o", str(out)], capture_output=True, text=True, env=ENV, timeout=1800)
                wall = time.perf_counter() - started
                if done.returncode != 0:
                    raise SystemExit(done.stderr[-800:])
                windows = state["requests"] - before
                serving = state["last"] - state["first"]  # first window sent to last answered: actors' start-up out
                rows.append({"actors": n, "windows": windows, "wall_s": round(wall, 2), "serving_s": round(serving, 2),
                             "windows_per_s": round(windows / serving, 2),
                             "run_sha256": hashlib.sha256(out.read_bytes()).hexdigest()[:16]})
    finally:
        httpd.shutdown()
        subprocess.run([RAY, "stop", "--force"], capture_output=True, env=ENV, timeout=120)
    base = rows[0]["windows_per_s"]
    for r in rows:
        r["speedup"] = round(r["windows_per_s"] / base, 2)
    print(table(rows, ["actors", "windows", "wall_s", "serving_s", "windows_per_s", "speedup", "run_sha256"]))
    save(args.name, {"queries": args.queries, "delay": args.delay, "cache": args.cache, "command": args.acurank,
                     "rows": rows})


if __name__ == "__main__":
    main()
