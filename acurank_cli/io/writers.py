"""Writers: TREC runs with strictly decreasing scores, topics, corpora (stats and traces: their records' ``to_json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping, TextIO

from ..records import Candidate, Doc, Ranked, strictly_decreasing
from .plan import replacing


def run_lines(qid: str, ranking: Iterable[Ranked], tag: str) -> str:
    """One query's block of TREC run lines ``qid Q0 docid rank score tag``."""
    ranking = list(ranking)
    scores = strictly_decreasing(r.score for r in ranking)
    return "".join(
        f"{qid} Q0 {r.docid} {i} {s!r} {tag}\n" for i, (r, s) in enumerate(zip(ranking, scores), 1)
    )


def write_run(fh: TextIO, runs: Mapping[str, Iterable[Candidate]], tag: str) -> None:
    """Write first-stage runs (scores as given; trec_eval ranks ties by docid)."""
    for qid, cands in runs.items():
        fh.write(
            "".join(f"{qid} Q0 {c.docid} {i} {c.score!r} {tag}\n" for i, c in enumerate(cands, 1))
        )


def write_topics(path: Path, topics: dict[str, str]) -> None:
    """Write topics as ``qid<TAB>text`` (the whole file, see :func:`~.plan.replacing`)."""
    with replacing(path) as fh:
        for qid, text in topics.items():
            fh.write(f"{qid}\t{' '.join(text.split())}\n")


def write_corpus(path: Path, docs: Iterable[Doc]) -> None:
    """Write a BEIR-style JSONL corpus (gzip when the name ends in .gz), reproducibly (the whole file)."""
    with replacing(path) as fh:
        for d in docs:
            fh.write(json.dumps({"_id": d.docid, "title": d.title, "text": d.text}, ensure_ascii=False) + "\n")
