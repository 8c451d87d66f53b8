"""Stragglers: wall time of the openai: backend against a loopback server whose latency varies per prompt.

A threaded chat-completions server on 127.0.0.1 answers each prompt after ``--latency`` seconds times a lognormal
factor exp(sd * z), z drawn from the prompt's sha256 (the same prompt waits the same in every run), ranking the
window in reverse. ``acurank rerank`` runs the first ``--queries`` DL19 queries with ``--concurrency 8`` and
default flags otherwise, for each method and each sd. With ``--servers N``, N such servers (replicas), one ``--base-url`` each, ``--concurrency`` slots each.
The ideal wall time is the seconds the servers slept over all their
slots (sum of latencies / (concurrency x servers)): what a scheduler that never leaves a slot idle would take.
One unmeasured run first (answers after 1 ms) caches the command's bytecode, as a user's first run does.
``--draws N``: each method and sd measured on N latency draws (draw k > 0 salts the digest with "k:"): one draw puts
its few slowest windows at one place in the schedule, which decides the wall at sd 0.8.
Prints a table and writes benchmarks/results/stragglers.json.

    PYTHONPATH=. python benchmarks/stragglers.py [--queries 24] [--sd 0.3 0.8] [--methods acurank-9 sw-1 acurank]
        [--acurank 'python -m acurank_cli']   (another command: the code to compare, e.g. with PYTHONPATH of a checkout)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine, save, start_chat_server, subset_run, table


def latency(base: float, sd: float, draw: int = 0):
    """Seconds to wait for a prompt: ``base`` x exp(sd z), z from the prompt's sha256 (``draw`` k > 0: of "k:" and the
    prompt, another draw of the same distribution; draw 0 is the one every earlier table measured)."""
    salt = f"{draw}:" if draw else ""

    def wait(user: str) -> float:
        digits = int.from_bytes(hashlib.sha256((salt + user).encode("utf-8")).digest()[:8], "big")
        u1, u2 = (digits >> 32) / 2**32 or 1e-12, (digits & 0xFFFFFFFF) / 2**32
        z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)  # Box-Muller, from the prompt's digest
        return base * math.exp(sd * z)
    return wait


def reverse(user: str):
    n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
    return " > ".join(f"[{i}]" for i in range(n, 0, -1)), n


#: The command's environment: this one's, less PYTHONDONTWRITEBYTECODE. A user's Python runs acurank from bytecode
#: (pip compiles an installed package; an editable install's is cached at its first import); with the variable set
#: (this project's sandbox sets it) every run compiled acurank's 81 modules from source first (0.1 s of its start).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(command: list[str], run: Path, method: str, base: float, sd: float, concurrency: int, folder: Path,
            flags: list[str], servers: int = 1, draw: int = 0, log: list | None = None) -> dict:
    """One timed run. ``log``: given, the row keeps each request as "start latency query" (seconds after the process
    started, seconds slept, the query's place in ``steps``: each query's windows a step, from the run's stats), what
    benchmarks/schedule_policies.py replays."""
    wait = latency(base, sd, draw)

    def logged(user: str) -> float:
        seconds = wait(user)
        if log is not None:
            query = re.search(r"^Search Query: (.*)\.$", user, flags=re.MULTILINE)  # the prompt's "Search Query: {q}."
            log.append([round(time.perf_counter() - started, 4), seconds, query.group(1) if query else ""])
        return seconds

    started_servers = [start_chat_server(logged, reverse) for _ in range(servers)]
    urls = [a for httpd, _, _ in started_servers for a in ("--base-url", f"http://127.0.0.1:{httpd.server_address[1]}/v1")]
    out = folder / f"{method}.{sd}.run"
    started = time.perf_counter()
    done = subprocess.run([*command, "rerank", str(run), "--method", method, "--reranker", "openai:bench",
                           *urls, "--concurrency", str(concurrency), "--no-cache", "--quiet",
                           "-o", str(out), "--overwrite", *flags],
                          capture_output=True, text=True, timeout=900, env=ENV)
    wall = time.perf_counter() - started
    for httpd, _, _ in started_servers:
        httpd.shutdown()
    if done.returncode != 0:
        raise SystemExit(f"{method}: {done.stderr.strip()[-500:]}")
    states = [state for _, state, _ in started_servers]
    ideal = sum(s["slept"] for s in states) / (concurrency * servers)  # every slot of every server always busy
    row = {"method": method, "sd": sd, "draw": draw, "servers": servers, "wall_s": round(wall, 2),
           "ideal_s": round(ideal, 2), "ratio": round(wall / ideal, 2), "requests": sum(s["requests"] for s in states),
           "max_in_flight": "+".join(str(s["max_in_flight"]) for s in states),
           "run_sha256": hashlib.sha256(out.read_bytes()).hexdigest()[:16]}
    if log is not None:  # each query's steps (windows a step, from the run's stats), in input order, with its text
        topics = dict(line.split("\t", 1) for line in (run.parent / "topics.tsv").read_text().splitlines() if line)
        stats = [json.loads(line) for line in out.with_suffix(".stats.jsonl").read_text().splitlines()]
        row["steps"] = [[r["qid"], topics[r["qid"]].strip(), [sum(1 for n in step["window_sizes"] if n >= 2)
                                                          for step in r["iterations"]]] for r in stats]
        place = {text: i for i, (_, text, _) in enumerate(row["steps"])}
        row["requests_log"] = [f"{start:.3f} {seconds:.4f} {place[query.strip()]}" for start, seconds, query in log]
    return row


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
    ap.add_argument("--draws", type=int, default=1, help="latency draws 0 .. N-1 per method and sd (0: the tables' own)")
    ap.add_argument("--log-requests", action="store_true",
                    help="keep every request's start, latency and query in the results (benchmarks/schedule_policies.py)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run, _ = subset_run("dl19", args.queries, folder / "in")
        # once, unmeasured (answers after 1 ms): the bytecode cached as a user's first run caches it
        measure(shlex.split(args.acurank), run, args.methods[0], 0.001, 0.0, args.concurrency, folder,
                shlex.split(args.flags), args.servers)
        rows = []
        for sd in args.sd:
            for m in args.methods:
                for draw in range(args.draws):
                    log: list | None = [] if args.log_requests else None
                    rows.append(measure(shlex.split(args.acurank), run, m, args.latency, sd, args.concurrency, folder,
                                        shlex.split(args.flags), args.servers, draw, log))
    print(table(rows, ["method", "sd", "draw", "servers", "wall_s", "ideal_s", "ratio", "requests", "max_in_flight",
                       "run_sha256"]))
    print(f"median ratio {statistics.median(r['ratio'] for r in rows):.2f}")
    if args.draws > 1:
        for sd in args.sd:
            for m in args.methods:
                mine = [r for r in rows if r["method"] == m and r["sd"] == sd]
                ratio = sum(r["wall_s"] for r in mine) / sum(r["ideal_s"] for r in mine)
                print(f"{m} sd {sd:g}: over {len(mine)} draws, total wall / total ideal {ratio:.3f}; ratios "
                      f"{min(r['ratio'] for r in mine):.2f}-{max(r['ratio'] for r in mine):.2f}")
    save(args.name, {"machine": machine(), "queries": args.queries, "latency": args.latency, "draws": args.draws,
                     "concurrency": args.concurrency, "servers": args.servers, "command": args.acurank, "rows": rows})


if __name__ == "__main__":
    main()
