"""The persistent embedding store: a minilm table of several methods over the same passages,
with and without it.

    python benchmarks/embedding_store.py [--dataset dl19] [--methods sw-1 acurank-9 acurank]

Each method runs as a new process would: a fresh MiniLM reranker (empty in-memory cache) behind a call cache
that starts empty for each mode. "without" keeps the call cache but not the store (what every earlier
version did); "with" keeps both. Prints, per method, the texts run through the model and the wall seconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli import Reranker  # noqa: E402
from acurank_cli.io.collection_files import iter_corpus, read_topics  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402
from acurank_cli.rerankers.backends.minilm import MiniLMReranker  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="dl19")
    ap.add_argument("--methods", nargs="+", default=["sw-1", "acurank-9", "acurank"])
    args = ap.parse_args()
    folder = ROOT / "sample_runs" / args.dataset
    run = read_run(folder / "bm25.run")
    topics = read_topics(folder / "topics.tsv")
    texts = {d.docid: d for d in iter_corpus(folder / "passages.jsonl.gz")}
    batch = [(topics[q], [{"id": c.docid, "text": texts[c.docid].text, "title": texts[c.docid].title, "score": c.score}
                          for c in run[q]]) for q in run]
    qids = list(run)
    print(f"{args.dataset}: {len(qids)} queries, {sum(len(d) for _, d in batch)} candidates, "
          f"{len({c.docid for q in run for c in run[q]})} distinct passages")
    print("| mode | method | texts encoded | wall s |")
    print("|---|---|---|---|")
    saved = MiniLMReranker.use_store
    for mode in ("without store", "with store"):
        if mode == "without store":
            MiniLMReranker.use_store = lambda self, call_cache: None
        else:
            MiniLMReranker.use_store = saved
        total_encoded, total_wall = 0, 0.0
        with tempfile.TemporaryDirectory() as tmp:
            for method in args.methods:
                t0 = time.perf_counter()
                init = {"init": "score"} if method.startswith("acurank") else {}  # the CLI's init
                with Reranker("minilm", method=method, cache=str(Path(tmp) / "calls.sqlite"), **init) as rr:
                    rr.rerank_batch(batch, qids=qids)
                    encoded = rr.backend.encoded
                wall = time.perf_counter() - t0
                total_encoded += encoded
                total_wall += wall
                print(f"| {mode} | {method} | {encoded} | {wall:.1f} |", flush=True)
        print(f"| {mode} | all {len(args.methods)} | {total_encoded} | {total_wall:.1f} |", flush=True)
    MiniLMReranker.use_store = saved


if __name__ == "__main__":
    main()
