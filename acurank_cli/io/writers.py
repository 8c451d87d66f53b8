"""Writers: TREC runs with strictly decreasing scores, topics, corpora, per-query stats JSONL."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from pathlib import Path
from typing import Iterable, Mapping, TextIO

from ..records import Candidate, Doc, QueryOutcome, Ranked, Step


def strictly_decreasing(scores: Iterable[float]) -> list[float]:
    """Nudge scores (already in output order) down where needed so they strictly decrease."""
    out: list[float] = []
    for s in scores:
        if out and not s < out[-1]:
            s = math.nextafter(out[-1], -math.inf)
        out.append(float(s))
    return out


def positional(docids: Iterable[str]) -> tuple[Ranked, ...]:
    """Positional scores n, n-1, ..., 1 for methods without a score of their own."""
    docids = list(docids)
    n = len(docids)
    return tuple(Ranked(d, float(n - i)) for i, d in enumerate(docids))


def final_ranking(ranked: Iterable[Ranked]) -> tuple[Ranked, ...]:
    """A strategy's ranking with run-file scores: its own (mu), nudged to decrease strictly, or
    positional (n, n-1, ..., 1) for a method that orders without scores (score None)."""
    ranked = list(ranked)
    if any(r.score is None for r in ranked):
        return positional(r.docid for r in ranked)
    return tuple(Ranked(r.docid, s) for r, s in zip(ranked, strictly_decreasing(r.score for r in ranked)))


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
    """Write topics as ``qid<TAB>text``."""
    with path.open("w", encoding="utf-8") as fh:
        for qid, text in topics.items():
            fh.write(f"{qid}\t{' '.join(text.split())}\n")


def write_corpus(path: Path, docs: Iterable[Doc]) -> None:
    """Write a BEIR-style JSONL corpus (gzip when the name ends in .gz), reproducibly."""
    opener = (lambda p: gzip.GzipFile(p, "wb", mtime=0)) if path.suffix == ".gz" else (
        lambda p: open(p, "wb")
    )
    with opener(path) as fh:
        for d in docs:
            rec = {"_id": d.docid, "title": d.title, "text": d.text}
            fh.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))


def trace_record(qid: str, method: str, step: Step) -> dict:
    """One ``--trace`` JSONL record: the step and every document's rating (typed snapshot -> JSON)."""
    snap = step.snapshot()
    return {"qid": qid, "method": method, "iteration": step.iteration, "phase": step.phase.value, "t": snap.t,
            "docs": [dataclasses.asdict(d) for d in snap.docs]}


def stats_record(outcome: QueryOutcome) -> dict:
    """The per-query stats JSONL record (everything but the ranking); ``endpoints`` (calls per serving
    endpoint) only where a backend named one."""
    tally = dataclasses.asdict(outcome.tally)
    if not tally["endpoints"]:
        del tally["endpoints"]
    return {
        "qid": outcome.qid,
        "method": outcome.method,
        **tally,
        "iterations": list(outcome.iterations),
        "stop": outcome.stop,
        "seconds": round(outcome.seconds, 4),
    }
