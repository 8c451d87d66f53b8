"""The peer's side of ``benchmarks/peer.py``: RankLLM's ``RankListwiseOSLLM`` on vLLM, run in the peer's own venv
(``make setup-peer``), so it imports nothing of acurank's. It reads the same BM25 run, passages and topics, reranks
the chosen queries with RankLLM's own batched sliding window (``rerank_batch``: every query in flight, its
``batch_size`` LLM slots), and writes a TREC run plus one JSON line per model call (prompt, answer, tokens).

    .venv-peer/bin/python benchmarks/peer_rankllm.py --model DIR --run bm25.run --passages passages.jsonl.gz \\
        --topics topics.tsv --qids 264014,104861 --output peer.run --calls peer.calls.jsonl [--template acurank.yaml]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time

STARTED = time.perf_counter()


def read_run(path: str, qids: list[str], depth: int) -> dict[str, list[tuple[str, float]]]:
    ranked: dict[str, list[tuple[int, str, float]]] = {q: [] for q in qids}
    with open(path, encoding="utf-8") as f:
        for line in f:
            qid, _, docid, rank, score, _ = line.split()
            if qid in ranked:
                ranked[qid].append((int(rank), docid, float(score)))
    return {q: [(d, s) for _, d, s in sorted(rows)[:depth]] for q, rows in ranked.items()}


def read_passages(path: str, wanted: set[str]) -> dict[str, dict[str, str]]:
    opener = gzip.open if path.endswith(".gz") else open
    found: dict[str, dict[str, str]] = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["_id"] in wanted:
                found[row["_id"]] = {"title": row.get("title", ""), "text": row["text"]}
    return found


def requests_of(args: argparse.Namespace) -> list:
    """RankLLM's requests for the chosen queries: each query's BM25 candidates with their passages."""
    from rank_llm.data import Candidate, Query, Request

    qids = args.qids.split(",")
    topics = dict(line.rstrip("\n").split("\t", 1) for line in open(args.topics, encoding="utf-8"))
    run = read_run(args.run, qids, args.depth)
    passages = read_passages(args.passages, {d for rows in run.values() for d, _ in rows})
    return [Request(query=Query(text=topics[q], qid=q),
                    candidates=[Candidate(docid=d, score=s, doc=passages[d]) for d, s in run[q]]) for q in qids]


def add_inputs(ap: argparse.ArgumentParser) -> None:
    """The model and the queries' inputs, as both peer-side scripts take them."""
    ap.add_argument("--model", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--passages", required=True)
    ap.add_argument("--topics", required=True)
    ap.add_argument("--qids", required=True)
    ap.add_argument("--depth", type=int, default=100)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_inputs(ap)
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--step", type=int, default=10)
    ap.add_argument("--context-size", type=int, default=4096)
    ap.add_argument("--template", default=None, help="a RankLLM prompt template (YAML); its own RankZephyr one if not given")
    ap.add_argument("--first", action="store_true", help="FIRST: rank each window by the first token's logits over "
                    "letter identifiers (use_logits, use_alpha; its RankZephyr alpha template)")
    ap.add_argument("--output", required=True)
    ap.add_argument("--calls", required=True)
    args = ap.parse_args()

    from rank_llm.rerank.listwise import RankListwiseOSLLM

    requests = requests_of(args)
    kwargs = {"prompt_template_path": args.template} if args.template else {}
    if args.first:
        kwargs.update(use_logits=True, use_alpha=True)
    reranker = RankListwiseOSLLM(model=args.model, context_size=args.context_size, window_size=args.window,
                                 stride=args.step, **kwargs)
    loaded = time.perf_counter()
    results = reranker.rerank_batch(requests, rank_start=0, rank_end=args.depth, populate_invocations_history=True)
    done = time.perf_counter()
    with open(args.output, "w", encoding="utf-8") as out, open(args.calls, "w", encoding="utf-8") as calls:
        for result in results:
            n = len(result.candidates)
            for rank, cand in enumerate(result.candidates, 1):
                out.write(f"{result.query.qid} Q0 {cand.docid} {rank} {n + 1 - rank} rankllm\n")
            for inv in result.invocations_history:
                calls.write(json.dumps({"qid": result.query.qid, "prompt": inv.prompt, "answer": inv.response,
                                        "input_tokens": inv.input_token_count,
                                        "output_tokens": inv.output_token_count}) + "\n")
    reranker.close()
    print(json.dumps({"load_seconds": loaded - STARTED, "rerank_seconds": done - loaded}), file=sys.stderr)


if __name__ == "__main__":
    main()
