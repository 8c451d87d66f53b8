"""Shared benchmark helpers: sample tasks of size n, instrumented engine timing, result files."""

from __future__ import annotations

import json
import platform
import time
from contextlib import contextmanager
from pathlib import Path

from acurank_cli.io.candidates import read_candidates
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.records import Candidate, RankingTask, RerankResult
from acurank_cli.rerankers.backend import RerankerBase

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def load(dataset: str = "dl23"):
    """Tasks (BM25 top-100) and qrels of a bundled sample dataset."""
    bundle, _ = read_candidates(ROOT / "sample_runs" / dataset / "bm25.run")
    qrels = read_qrels(ROOT / "sample_runs" / dataset / "qrels.txt")
    return [RankingTask(q, "", c) for q, c in bundle.runs.items()], qrels


def tasks_of_size(n: int, dataset: str = "dl23", limit: int | None = None):
    """Tasks with n candidates: a prefix of each list (n <= 100), or several queries' candidates
    concatenated under one qid with their BM25 scores (n > 100; qrels merged, max grade)."""
    tasks, qrels = load(dataset)
    if n <= 100:
        out = [RankingTask(t.qid, "", t.candidates[:n]) for t in tasks]
        return (out[:limit] if limit else out), qrels
    per = -(-n // 100)
    merged, merged_qrels = [], dict(qrels)
    for j in range(0, len(tasks) - per + 1, per):
        group = tasks[j : j + per]
        qid = "+".join(t.qid for t in group)
        seen: dict[str, Candidate] = {}
        grades: dict[str, int] = {}
        for t in group:
            for c in t.candidates:
                if c.docid not in seen:
                    seen[c.docid] = c
            for d, g in qrels.get(t.qid, {}).items():
                grades[d] = max(g, grades.get(d, 0))
        cands = sorted(seen.values(), key=lambda c: (c.score, c.docid), reverse=True)[:n]
        merged.append(RankingTask(qid, "", tuple(cands)))
        merged_qrels[qid] = grades
    return (merged[:limit] if limit else merged), merged_qrels


class InstantReranker(RerankerBase):
    """Returns the presented order at once: isolates the engine's own cost."""

    name = "instant"
    needs_texts = False

    def rerank_batch(self, requests):
        return [RerankResult(order=tuple(range(len(r.docids)))) for r in requests]


class Timers:
    """Accumulates wall and CPU seconds per named section."""

    def __init__(self):
        self.wall: dict[str, float] = {}

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - t0

        return timed


@contextmanager
def instrument_acurank(timers: Timers):
    """Time the TrueSkill updates and the threshold/probability computations of the engine."""
    from acurank_cli.method import acurank as mod
    from acurank_cli.method import baselines as base_mod
    from acurank_cli.method import trueskill, uncertainty

    saved = (uncertainty.threshold, uncertainty.exceed_probability, mod.get_updater, base_mod.get_updater)
    uncertainty.threshold = timers.wrap("threshold", saved[0])
    uncertainty.exceed_probability = timers.wrap("threshold", saved[1])
    timed_get = lambda kind: timers.wrap("update", trueskill.get_updater(kind))  # noqa: E731
    mod.get_updater = timed_get
    base_mod.get_updater = timed_get
    try:
        yield timers
    finally:
        uncertainty.threshold, uncertainty.exceed_probability, mod.get_updater, base_mod.get_updater = saved


def machine() -> dict:
    """What ran the benchmark."""
    import os

    return {"python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor(), "cores": os.cpu_count()}


def work_and_out(doc: str, work: str, out: str):
    """A benchmark's arguments ``--work DIR`` (its runs, made once and kept; made here) and ``--out NAME`` (its
    results' name, :func:`save`), with ``doc``'s first paragraph as the description."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path(work))
    parser.add_argument("--out", default=out)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    return args


def save(name: str | Path, payload: dict) -> Path:
    """Write benchmarks/results/<name>.json, or the file ``name`` names when it ends in .json (``--out X.json``)."""
    path = Path(name) if str(name).endswith(".json") else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=1) + "\n")
    return path


def table(rows: list[dict], columns: list[str]) -> str:
    """A small fixed-width text table."""
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))
    return "\n".join(lines)


def start_chat_server(delay, answer):
    """A loopback OpenAI-compatible chat server: each POST waits ``delay`` s (a number, or a function of the user
    message: a per-prompt latency), then answers ``answer(user_message) -> (content, window_size)``. Returns
    (server, state, lock); ``state`` counts requests, the most in flight and the seconds slept."""
    import json
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    state = {"in_flight": 0, "max_in_flight": 0, "requests": 0, "slept": 0.0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls between header and body writes

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with lock:
                state["in_flight"] += 1
                state["requests"] += 1
                state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
            user = body["messages"][-1]["content"]
            content, n = answer(user)
            wait = delay(user) if callable(delay) else delay
            time.sleep(wait)
            with lock:
                state["slept"] += wait
            data = json.dumps({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 5 * n},
            }).encode()
            with lock:
                state["in_flight"] -= 1
                state["first"] = min(state.get("first", float("inf")), time.perf_counter() - wait)
                state["last"] = time.perf_counter()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 64

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, state, lock


def subset_run(dataset: str, queries: int, folder: Path) -> tuple[Path, list[str]]:
    """The first ``queries`` queries of a bundled BM25 run, written to ``folder/bm25.run`` beside links
    to the dataset's topics and passages (the sample_runs layout, which ``rerank`` picks up)."""
    src = ROOT / "sample_runs" / dataset
    lines = (src / "bm25.run").read_text().splitlines()
    qids = list(dict.fromkeys(l.split()[0] for l in lines))[:queries]
    folder.mkdir(parents=True, exist_ok=True)
    run = folder / "bm25.run"
    run.write_text("\n".join(l for l in lines if l.split()[0] in qids) + "\n")
    for name in ("topics.tsv", "passages.jsonl.gz", "qrels.txt"):
        if not (folder / name).exists():
            (folder / name).symlink_to(src / name)
    return run, qids


def dl19_texts(count: int, depth: int = 100) -> list[tuple[str, str, list[str], list[str]]]:
    """(qid, query, docids, passage texts) of the first ``count`` DL19 sample queries, their BM25 top ``depth``."""
    import gzip

    src = ROOT / "sample_runs" / "dl19"
    topics = dict(line.split("\t", 1) for line in (src / "topics.tsv").read_text().splitlines() if line)
    run: dict[str, list[str]] = {}
    for line in (src / "bm25.run").read_text().splitlines():
        run.setdefault(line.split()[0], []).append(line.split()[2])
    passages = {}
    with gzip.open(src / "passages.jsonl.gz", "rt") as fh:
        for line in fh:
            r = json.loads(line)
            passages[str(r.get("_id", r.get("id")))] = r.get("text", r.get("contents"))
    return [(q, topics[q], run[q][:depth], [passages[d] for d in run[q][:depth]]) for q in list(run)[:count]]
