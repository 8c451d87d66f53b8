"""Wall time of the openai: backend against a loopback server answering in a fixed time.

A threaded chat-completions server on 127.0.0.1 sleeps ``--delay`` seconds (default 0.2) per
reply and ranks the window in reverse; N windows of 20 passages are reranked at each concurrency
(1 / 4 / 8 / 16 by default). Prints a table and writes benchmarks/results/openai_concurrency.json.

    PYTHONPATH=. python benchmarks/openai_concurrency.py [--windows 32] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import time
from pathlib import Path

from acurank_cli.records import Doc, RerankRequest
from acurank_cli.rerankers.backend import build_reranker
from common import start_chat_server

RESULTS = Path(__file__).resolve().parent / "results" / "openai_concurrency.json"


def start_server(delay: float):
    """A loopback server: every POST sleeps ``delay`` then answers ``[n] > ... > [1]``."""

    def reverse(user: str):
        n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
        return " > ".join(f"[{i}]" for i in range(n, 0, -1)), n

    return start_chat_server(delay, reverse)


def windows(count: int, size: int = 20) -> list[RerankRequest]:
    words = ["retrieval", "passage", "relevance", "query", "document", "ranking", "model", "window"]
    return [
        RerankRequest(
            f"q{k}", f"benchmark query {k}", tuple(f"d{k}-{j}" for j in range(size)),
            tuple(Doc(f"d{k}-{j}", " ".join(words[(j + i) % len(words)] for i in range(80)) + f" {k}-{j}")
                  for j in range(size)),
        )
        for k in range(count)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=32)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()

    httpd, state, lock = start_server(args.delay)
    base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    reqs = windows(args.windows)
    rows = []
    try:
        for c in args.concurrency:
            rr = build_reranker("openai:bench-model", **{"base_url": base_url, "concurrency": c, "timeout": 30})
            for r in reqs:  # build prompts outside the timed region
                rr.prompt(r)
            with lock:
                state.update(in_flight=0, max_in_flight=0, requests=0)
            t0 = time.perf_counter()
            results = rr.rerank(reqs)
            wall = time.perf_counter() - t0
            ideal = args.delay * -(-args.windows // c)
            assert all(res.parse == "ok" for res in results)
            rows.append({
                "concurrency": c,
                "windows": args.windows,
                "wall_seconds": round(wall, 3),
                "ideal_seconds": round(ideal, 3),
                "overhead_ms_per_window": round(1000 * (wall - ideal) / args.windows, 2),
                "windows_per_second": round(args.windows / wall, 2),
                "max_in_flight_at_server": state["max_in_flight"],
                "speedup_vs_1": None,
            })
    finally:
        httpd.shutdown()
        httpd.server_close()
    base = next((r["wall_seconds"] for r in rows if r["concurrency"] == 1), None)
    for r in rows:
        r["speedup_vs_1"] = round(base / r["wall_seconds"], 2) if base else None

    print(f"openai: backend, loopback server, {args.delay * 1000:.0f} ms per reply, {args.windows} windows of 20")
    print(f"{'conc':>5} {'wall s':>8} {'ideal s':>8} {'win/s':>7} {'max in flight':>14} {'speedup':>8}")
    for r in rows:
        print(f"{r['concurrency']:>5} {r['wall_seconds']:>8.3f} {r['ideal_seconds']:>8.3f} {r['windows_per_second']:>7.2f} "
              f"{r['max_in_flight_at_server']:>14} {r['speedup_vs_1'] or 0:>8.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "openai_concurrency",
        "delay_seconds": args.delay,
        "windows": args.windows,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "rows": rows,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
