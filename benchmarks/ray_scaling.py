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

``--backend plugin``: the windows are executed by a plug-in backend (``ACURANK_BACKENDS``, imported by the
cluster's workers) that takes ``--delay`` seconds a window and any batch (``lane_batch`` None, as an engine or a
user's plug-in does), so each actor executes whatever batch the scheduler hands it; the speed-up is wall time
against 1 actor's (issue 86's check: 43 queries at 0.3 s a window, 4 actors at least 3.2x):

    PYTHONPATH=. python benchmarks/ray_scaling.py --backend plugin --queries 43 --delay 0.3 --name ray_scaling_plugin
"""

from __future__ import annotations

import argparse
import hashlib
import json
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


#: the plug-in backend of ``--backend plugin``: ``sleepy:SECONDS`` sleeps that long a window, answers in reverse
PLUGIN = """
import time

from acurank_cli import RerankerBase, RerankResult, register


@register("sleepy", takes_arg=True, help="sleeps SECONDS a window (any batch), answers in reverse (benchmarks)")
class Sleepy(RerankerBase):
    name = "sleepy"

    def __init__(self, arg):
        self.delay = float(arg)

    def rerank_batch(self, requests):
        time.sleep(self.delay * len(requests))
        return [RerankResult(order=tuple(reversed(range(len(r.docs))))) for r in requests]
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--cache", action="store_true", help="each run with a call cache of its own (else --no-cache)")
    ap.add_argument("--acurank", default=f"{sys.executable} -m acurank_cli", help="the command to time")
    ap.add_argument("--name", default="ray_scaling")
    ap.add_argument("--backend", choices=["openai", "plugin"], default="openai",
                    help="openai: one request in flight an actor; plugin: a plug-in that takes any batch (see above)")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(ENV)
        if args.backend == "plugin":  # before the cluster starts: its workers import the plug-in
            (Path(tmp) / "sleepy_backend.py").write_text(PLUGIN)
            env.update(PYTHONPATH=os.pathsep.join(p for p in (tmp, env.get("PYTHONPATH")) if p),
                       ACURANK_BACKENDS="sleepy_backend")
        subprocess.run([RAY, "start", "--head", f"--port={port}", "--num-cpus=8", "--include-dashboard=false",
                        "--disable-usage-stats"], check=True, capture_output=True, env=env, timeout=180)
        httpd, state, lock = start_chat_server(args.delay, reverse)
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        try:
            run, _ = subset_run("dl19", args.queries, Path(tmp) / "in")
            rows = [_measure(args, n, run, Path(tmp), port, url, state, env) for n in args.actors]
        finally:
            httpd.shutdown()
            subprocess.run([RAY, "stop", "--force"], capture_output=True, env=env, timeout=120)
    for r in rows:
        r["speedup"] = round(r["windows_per_s"] / rows[0]["windows_per_s"], 2) if args.backend == "openai" else \
            round(rows[0]["wall_s"] / r["wall_s"], 2)
    print(table(rows, ["actors", "windows", "wall_s", "serving_s", "windows_per_s", "speedup", "run_sha256"]))
    save(args.name, {"queries": args.queries, "delay": args.delay, "cache": args.cache, "command": args.acurank,
                     "backend": args.backend, "rows": rows})


def _measure(args, n: int, run: Path, tmp: Path, port: int, url: str, state: dict, env: dict) -> dict:
    """One run with ``n`` actors: its wall time; with the openai backend, the windows the server answered and the
    time from the first sent to the last answered (the actors' start-up left out)."""
    before = state["requests"]
    state.pop("first", None)
    out = tmp / f"{n}.run"
    cache = ["--cache", str(tmp / f"{n}.sqlite")] if args.cache else ["--no-cache"]
    backend = (["--reranker", "openai:bench", "--base-url", url, "--concurrency", "1"] if args.backend == "openai"
               else ["--reranker", f"sleepy:{args.delay}"])
    started = time.perf_counter()
    done = subprocess.run([*shlex.split(args.acurank), "baseline", str(run), "--method", "sw-1", *backend, *cache,
                           "--quiet", "--ray", f"127.0.0.1:{port}", "--actors", str(n), "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-800:])
    row = {"actors": n, "wall_s": round(wall, 2), "run_sha256": hashlib.sha256(out.read_bytes()).hexdigest()[:16]}
    if args.backend == "openai":
        windows = state["requests"] - before
        serving = state["last"] - state["first"]
        row.update(windows=windows, serving_s=round(serving, 2), windows_per_s=round(windows / serving, 2))
    else:
        stats = [json.loads(line) for line in out.with_suffix(".stats.jsonl").read_text().splitlines()]
        row.update(windows=sum(r["calls"] for r in stats), windows_per_s=round(sum(r["calls"] for r in stats) / wall, 2))
    return row


if __name__ == "__main__":
    main()
