"""``acurank convert``: a candidate file (RankGPT JSON, AcuRank JSONL, RankLLM JSONL) split into the
sample_runs layout: ``bm25.run``, ``topics.tsv``, ``passages.jsonl.gz`` and, when known, ``qrels.txt``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .candidates import read_candidates
from .plan import replacing
from .writers import write_corpus, write_run, write_topics


#: The files a conversion writes into its folder (qrels.txt when qrels are known).
LAYOUT = ("bm25.run", "topics.tsv", "passages.jsonl.gz", "qrels.txt")


@dataclass(frozen=True)
class Converted:
    """What a conversion wrote: the input's format, the queries kept and the passages written."""

    fmt: str
    queries: int
    passages: int


def convert_candidates(candidates: str, out_dir: Path, qrels: dict[str, dict[str, int]] | None = None,
                       tag: str = "bm25", depth: int = 100) -> Converted:
    """Write the layout; with ``qrels`` (read by the caller, or qrels inside the file) only judged queries are
    kept."""
    bundle, fmt = read_candidates(candidates, depth)
    if fmt == "trec":
        raise InputError("expected a candidate file with texts, got a plain TREC run", candidates)
    judged = qrels if qrels else bundle.qrels
    keep = [q for q in bundle.runs if not judged or q in judged]
    out_dir.mkdir(parents=True, exist_ok=True)
    with replacing(out_dir / "bm25.run") as fh:
        write_run(fh, {q: bundle.runs[q] for q in keep}, tag)
    write_topics(out_dir / "topics.tsv", {q: bundle.topics[q] for q in keep})
    seen = dict.fromkeys(c.docid for q in keep for c in bundle.runs[q])
    write_corpus(out_dir / "passages.jsonl.gz", (bundle.docs[d] for d in seen))
    if judged:
        with replacing(out_dir / "qrels.txt") as fh:
            for q in keep:
                for d, g in judged[q].items():
                    fh.write(f"{q} 0 {d} {g}\n")
    return Converted(fmt, len(keep), len(seen))
