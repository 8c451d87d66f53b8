"""acurank serve under load: 1, 4 and 16 concurrent clients sending DL19 queries, against the CLI on the same queries.

Backends: ``openai:`` against a loopback chat server that answers every window after ``--latency`` seconds (ranking
it in reverse), with ``--concurrency 8``; and ``minilm`` (an engine: every waiting window is one batch). Each client
sends its share of the queries one after another (the top-100 BM25 passages as strings, ``top_n`` 10, Cohere v2).
Per configuration: wall time, requests/s, p50 and p99 latency, backend batches against requests (from /metrics),
and whether every answer equals the Python API's for its query (computed first, against a server without latency).
The CLI row is ``acurank rerank`` on the same queries with the same first stage (scores n..1, ``--init zscore``:
what the server does with documents that carry no score), so it makes the same windows.

    PYTHONPATH=. python benchmarks/serve_load.py [--queries 16] [--clients 1 4 16] [--backends openai minilm]
        [--method acurank]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from common import ROOT, dl19_texts, machine, save, start_chat_server, table

DL19 = ROOT / "sample_runs" / "dl19"


def reverse(user: str):
    n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
    return " > ".join(f"[{i}]" for i in range(n, 0, -1)), n


METHOD = "acurank"


def backend_flags(name: str, url: str | None) -> list[str]:
    if name == "openai":
        return ["--reranker", "openai:bench", "--base-url", url, "--concurrency", "8", "--method", METHOD]
    return ["--reranker", "minilm", "--method", METHOD]


def expected_orders(name: str, qs, url: str | None) -> dict[str, list[int]]:
    from acurank_cli.api import Reranker

    options = {"base_url": url, "concurrency": 8} if name == "openai" else {}
    with Reranker("openai:bench" if name == "openai" else "minilm", method=METHOD, cache=None, **options) as rr:
        outs = rr.rerank_batch([(q, texts) for _, q, _, texts in qs], qids=[qid for qid, *_ in qs], top_k=10)
    return {o.qid: [int(d.id) for d in o.docs] for o in outs}


def start_server(flags: list[str]) -> tuple[subprocess.Popen, str, list[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", "serve", "--port", "0", "--no-cache", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for line in list(lines):
            found = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            if found:
                return proc, found.group(1), lines
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise SystemExit(f"the server did not start: {''.join(lines)[-1000:]}")


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, flags=re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def load(url: str, qs, clients: int, expected: dict[str, list[int]]) -> dict:
    shares = [qs[i::clients] for i in range(clients)]
    latencies: list[float] = []
    wrong: list[str] = []
    lock = threading.Lock()

    def client(share):
        with httpx.Client(timeout=600) as http:
            for qid, query, _, texts in share:
                t0 = time.perf_counter()
                reply = http.post(f"{url}/v2/rerank", json={"query": query, "documents": texts, "top_n": 10})
                took = time.perf_counter() - t0
                with lock:
                    latencies.append(took)
                    if reply.status_code != 200 or [r["index"] for r in reply.json()["results"]] != expected[qid]:
                        wrong.append(qid)

    before = httpx.get(f"{url}/metrics").text
    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(share,)) for share in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    after = httpx.get(f"{url}/metrics").text
    lat = sorted(latencies)
    return {"clients": clients, "requests": len(lat), "wall_s": round(wall, 2), "req_per_s": round(len(lat) / wall, 2),
            "p50_s": round(statistics.median(lat), 2), "p99_s": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 2),
            "batches": int(metric(after, "acurank_backend_batches_total") - metric(before, "acurank_backend_batches_total")),
            "windows": int(metric(after, "acurank_backend_windows_total") - metric(before, "acurank_backend_windows_total")),
            "wrong": len(wrong)}


def cli_wall(name: str, qs, url: str | None, folder: Path) -> float:
    run = folder / "firststage.run"
    with run.open("w") as fh:
        for qid, _, docids, _ in qs:
            for rank, d in enumerate(docids, start=1):
                fh.write(f"{qid} Q0 {d} {rank} {len(docids) - rank + 1} firststage\n")
    flags = backend_flags(name, url)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(run), "--topics", str(DL19 / "topics.tsv"),
                           "--corpus", str(DL19 / "passages.jsonl.gz"), "--init", "zscore", "--no-cache", "--quiet",
                           "-o", str(folder / f"{name}.run"), "--overwrite", *flags], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-1000:])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--backends", nargs="+", default=["openai", "minilm"])
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--method", default="acurank")
    args = ap.parse_args()
    global METHOD
    METHOD = args.method
    qs = dl19_texts(args.queries)
    rows = []
    for name in args.backends:
        quick = start_chat_server(0.0, reverse) if name == "openai" else None
        expected = expected_orders(name, qs, f"http://127.0.0.1:{quick[0].server_address[1]}/v1" if quick else None)
        if quick:
            quick[0].shutdown()
        slow = start_chat_server(args.latency, reverse) if name == "openai" else None
        url = f"http://127.0.0.1:{slow[0].server_address[1]}/v1" if slow else None
        with tempfile.TemporaryDirectory() as tmp:
            cli = cli_wall(name, qs, url, Path(tmp))
        rows.append({"backend": name, "clients": "CLI", "requests": len(qs), "wall_s": round(cli, 2),
                     "req_per_s": round(len(qs) / cli, 2)})
        try:
            for clients in args.clients:  # a fresh server each time: nothing cached in memory from the last
                proc, server, _ = start_server(backend_flags(name, url))
                try:
                    row = {"backend": name, **load(server, qs, clients, expected)}
                finally:
                    proc.terminate()
                    proc.wait(60)
                row["x_cli"] = round(row["wall_s"] / cli, 2)
                rows.append(row)
                print(row, flush=True)
        finally:
            if slow:
                slow[0].shutdown()
    print(table(rows, ["backend", "clients", "requests", "wall_s", "req_per_s", "p50_s", "p99_s", "batches",
                       "windows", "wrong", "x_cli"]))
    save(f"serve_load_{args.method}_{'_'.join(args.backends)}", {"machine": machine(), "queries": args.queries, "latency": args.latency,
                                       "method": args.method, "rows": rows})


if __name__ == "__main__":
    main()
