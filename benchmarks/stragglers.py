"""Stragglers: wall time of the openai: backend against a loopback server whose latency varies per prompt.

A threaded chat-completions server on 127.0.0.1 answers each prompt after ``--latency`` seconds times a lognormal
factor exp(sd * z), z drawn from the prompt's sha256 (the same prompt waits the same in every run), ranking the
window in reverse. ``acurank rerank`` runs the first ``--queries`` DL19 queries with ``--concurrency 8`` and
default flags otherwise, for each method and each sd. With ``--servers N``, N such servers (replicas), one ``--base-url`` each, ``--concurrency`` slots each.
The ideal wall time is the seconds the servers slept over all their
slots (sum of latencies / (concurrency x servers)): what a scheduler that never leaves a slot idle would take.
Prints a table and writes benchmarks/results/stragglers.json.

    PYTHONPATH=. python benchmarks/stragglers.py [--queries 24] [--sd 0.3 0.8] [--methods acurank-9 sw-1 acurank]
        [--acurank 'python -m acurank_cli']   (another command: the code to compare, e.g. with PYTHONPATH of a checkout)
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine, save, start_chat_server, subset_run, table


def latency(base: float, sd: float):
    def wait(user: str) -> float:
        digits = int.from_bytes(hashlib.sha256(user.encode("utf-8")).digest()[:8], "big")
        u1, u2 = (digits >> 32) / 2**32 or 1e-12, (digits & 0xFFFFFFFF) / 2**32
        z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)  # Box-Muller, from the prompt's digest
        return base * math.exp(sd * z)
    return wait


def reverse(user: str):
    n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
    return " > ".join(f"[{i}]" for i in range(n, 0, -1)), n


def measure(command: list[str], run: Path, method: str, base: float, sd: float, concurrency: int, folder: Path,
            flags: list[str], servers: int = 1) -> dict:
    started_servers = [start_chat_server(latency(base, sd), reverse) for _ in range(servers)]
    urls = [a for httpd, _, _ in started_servers for a in ("--base-url", f"http://127.0.0.1:{httpd.server_address[1]}/v1")]
    out = folder / f"{method}.{sd}.run"
    started = time.perf_counter()
    done = subprocess.run([*command, "rerank", str(run), "--method", method, "--reranker", "openai:bench",
                           *urls, "--concurrency", str(concurrency), "--no-cache", "--quiet",
                           "-o", str(out), "--overwrite", *flags],
                          capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    for httpd, _, _ in started_servers:
        httpd.shutdown()
    if done.returncode != 0:
        raise SystemExit(f"{method}: {done.stderr.strip()[-500:]}")
    states = [state for _, state, _ in started_servers]
    ideal = sum(s["slept"] for s in states) / (concurrency * servers)  # every slot of every server always busy
    return {"method": method, "sd": sd, "servers": servers, "wall_s": round(wall, 2), "ideal_s": round(ideal, 2),
            "ratio": round(wall / ideal, 2), "requests": sum(s["requests"] for s in states),
            "max_in_flight": "+".join(str(s["max_in_flight"]) for s in states),
            "run_sha256": hashlib.sha256(out.read_bytes()).hexdigest()[:16]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=24)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--sd", type=float, nargs="+", default=[0.3, 0.8])
    ap.add_argument("--methods", nargs="+", default=["acurank-9", "sw-1", "acurank"])
    ap.add_argument("--concurrency", type=int, default=8, help="slots per server")
    ap.add_argument("--servers", type=int, default=1, help="replicas: that many loopback servers, one --base-url each")
    ap.add_argument("--acurank", default=f"{sys.executable} -m acurank_cli")
    ap.add_argument("--name", default="stragglers")
    ap.add_argument("--flags", default="", help="more rerank flags, e.g. '--batch-queries 24'")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run, _ = subset_run("dl19", args.queries, folder / "in")
        rows = [measure(shlex.split(args.acurank), run, m, args.latency, sd, args.concurrency, folder,
                        shlex.split(args.flags), args.servers)
                for sd in args.sd for m in args.methods]
    print(table(rows, ["method", "sd", "servers", "wall_s", "ideal_s", "ratio", "requests", "max_in_flight", "run_sha256"]))
    print(f"median ratio {statistics.median(r['ratio'] for r in rows):.2f}")
    save(args.name, {"machine": machine(), "queries": args.queries, "latency": args.latency,
                     "concurrency": args.concurrency, "servers": args.servers, "command": args.acurank, "rows": rows})


if __name__ == "__main__":
    main()
