"""The peer's side of ``benchmarks/templates_peer.py``: RankLLM 0.26 renders a prompt template, in its own venv.

RankLLM's ``RankListwiseOSLLM`` with ``base_url`` (its OpenAI-compatible client) reranks the chosen queries with its
sliding window against the loopback server ``templates_peer.py`` runs, and writes each call's prompt from its
invocation history (the messages it sent). Then, for the same windows, the model text its in-process path would
feed the engine (its ``create_prompt`` with the chat template applied, as when no ``base_url`` is given).

    .venv-peer/bin/python benchmarks/peer_side/templates_side.py --model DIR --base-url URL --template T.yaml \\
        --run bm25.run --passages passages.jsonl.gz --topics topics.tsv --qids 264014,104861 --out calls.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rankllm_side import add_inputs, requests_of  # noqa: E402


def windows(depth: int, window: int, step: int) -> list[tuple[int, int]]:
    """RankLLM's sliding window positions, bottom up (its ``sliding_windows`` loop)."""
    out = []
    end, start = depth, depth - window
    while end > 0 and start + step != 0:
        start = max(start, 0)
        out.append((start, end))
        end -= step
        start -= step
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    add_inputs(ap)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--few-shot", default=None)
    ap.add_argument("--few-shot-count", type=int, default=0)
    ap.add_argument("--alpha", action="store_true")
    ap.add_argument("--context-size", type=int, default=16384)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from rank_llm.data import Result
    from rank_llm.rerank.listwise import RankListwiseOSLLM

    reranker = RankListwiseOSLLM(model=args.model, base_url=args.base_url, prompt_template_path=args.template,
                                 num_few_shot_examples=args.few_shot_count, few_shot_file=args.few_shot,
                                 use_alpha=args.alpha, window_size=20, stride=10, context_size=args.context_size)
    results = reranker.rerank_batch(requests_of(args), rank_start=0, rank_end=args.depth, populate_invocations_history=True)
    reranker._base_url = None  # its in-process path: the chat template applied to the same messages
    with open(args.out, "w", encoding="utf-8") as out:
        for result in results:
            for inv in result.invocations_history:
                out.write(json.dumps({"qid": result.query.qid, "kind": "messages", "prompt": inv.prompt},
                                     ensure_ascii=False) + "\n")
        for request in requests_of(args):  # the answers kept every order: the windows are the run's first ones
            result = Result(query=request.query, candidates=request.candidates, invocations_history=[])
            for start, end in windows(args.depth, 20, 10):
                text, _ = reranker.create_prompt(result, start, end)
                out.write(json.dumps({"qid": request.query.qid, "kind": "text", "window": [start, end],
                                      "docids": [c.docid for c in result.candidates[start:end]], "prompt": text},
                                     ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
