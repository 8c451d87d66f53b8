"""TREC runs (``qid Q0 docid rank score tag``): the one run parser, :func:`run_blocks`, and the readers that fold
over it (:func:`run_scores`, :func:`read_scores`, :func:`read_run`). Every line is checked by :func:`run_fields`
and a docid repeated within a query is refused at its line, whoever reads."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Container, Iterator, Sequence

from ..errors import InputError
from ..records import Candidate, Run
from .sources import Source, check_id, check_score, numbered, open_text, source_name


def trec_order(cands: list[Candidate]) -> list[Candidate]:
    """Order as trec_eval does: score descending, ties by docid descending."""
    return sorted(cands, key=lambda c: (c.score, c.docid), reverse=True)


def packed(candidates: Sequence[Candidate]) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Candidates as two columns: (docids, scores)."""
    return tuple(c.docid for c in candidates), tuple(c.score for c in candidates)


def in_trec_order(docids: Sequence[str], scores: Sequence[float]) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Two columns put in :func:`trec_order` (score descending, ties by docid descending)."""
    ranked = sorted(zip(scores, docids), reverse=True)
    return tuple(d for _, d in ranked), tuple(s for s, _ in ranked)


def run_fields(lineno: int, line: str, name: str) -> tuple[str, str, float]:
    """One TREC run line ``qid Q0 docid rank score tag``, checked: (qid, docid, score)."""
    parts = line.split()
    if len(parts) != 6:
        raise InputError(f"expected 6 columns 'qid Q0 docid rank score tag', found {len(parts)}", name, lineno)
    qid, _q0, docid, _rank, score_s, _tag = parts
    check_id(qid, "qid", name, lineno)
    check_id(docid, "docid", name, lineno)
    try:
        score = float(score_s)
    except ValueError:
        raise InputError(f"score {score_s!r} is not a number", name, lineno) from None
    check_score(score, name, lineno, text=score_s)
    return qid, docid, score


def placed(exc: InputError, src: Source) -> InputError:
    """``exc`` with the line of the TREC run file ``src`` that holds the candidate it is about (``exc.about``), where
    it names that file and no line yet: a refusal made after reading (an empty text, a score the rating init cannot
    start from) named the file alone. Read again on this error's path only, and only a regular file: a stream
    (stdin, a pipe, ``<(...)``, a FIFO) is read once (opened again, a FIFO would hang)."""
    if exc.about is None or exc.line is not None or exc.source != source_name(src) or not _regular(src):
        return exc
    qid, docid = exc.about
    try:
        with open_text(src) as fh:
            for lineno, line in numbered(fh):
                parts = line.split()
                if len(parts) == 6 and parts[0] == qid and parts[2] == docid:
                    exc.line = lineno
                    break
    except (OSError, InputError):
        return exc
    exc.args = (str(exc),)
    return exc


def _regular(src: Source) -> bool:
    try:
        return isinstance(src, (str, os.PathLike)) and src != "-" and Path(src).is_file()
    except OSError:
        return False


@dataclass(frozen=True)
class RunBlock:
    """The lines of one query that follow each other in a run file, in file order, as two columns (docids,
    scores: no record per line, the block may be a thousand lines). ``again``: the query had a block before (the
    file is not grouped by query); ``line``: where this block starts."""

    qid: str
    docids: tuple[str, ...]
    scores: tuple[float, ...]
    line: int
    again: bool = False


def _nothing(qid: str) -> Container[str]:
    return ()


def run_blocks(lines: Iterator[tuple[int, str]], name: str, keep: Callable[[str], bool] = lambda q: True,
               earlier: Callable[[str], Container[str]] = _nothing) -> Iterator[RunBlock]:
    """The one run parser: numbered TREC run lines read as they come, one block of a query's consecutive lines at
    a time, every line checked (:func:`run_fields`), a docid repeated within a block refused at its line. Only the
    current block is held; the candidates of a query ``keep`` refuses are checked and dropped (the block comes with
    none). A reader that joins a query's blocks gives ``earlier`` (qid -> the docids it holds of that query so far),
    so a docid repeated across blocks is refused at its line too, with no second copy of what it holds."""
    qid, docids, scores, seen, start, wanted, before = None, [], [], set(), 0, False, ()
    done: set[str] = set()
    for lineno, line in lines:
        q, docid, score = run_fields(lineno, line, name)
        if q != qid:
            if qid is not None:
                yield RunBlock(qid, tuple(docids), tuple(scores), start, qid in done)
                done.add(qid)
            qid, docids, scores, seen, start = q, [], [], set(), lineno
            wanted, before = keep(q), earlier(q)
        if docid in seen or docid in before:
            raise InputError(f"docid {docid} repeated in query {q}", name, lineno)
        seen.add(docid)
        if wanted:
            docids.append(docid)
            scores.append(score)
    if qid is not None:
        yield RunBlock(qid, tuple(docids), tuple(scores), start, qid in done)


def run_scores(lines: Iterator[tuple[int, str]], name: str, empty_ok: bool = False) -> dict[str, dict[str, float]]:
    """A run's numbered lines folded into qid -> docid -> score (the blocks of a query that is not grouped
    joined); "run file is empty" when there are none, unless ``empty_ok`` (a run whose every query was cut to no
    document: :func:`~acurank_cli.io.run_files.cut_to_nothing`)."""
    runs: dict[str, dict[str, float]] = {}
    for block in run_blocks(lines, name, earlier=lambda q: runs.get(q, ())):
        runs.setdefault(block.qid, {}).update(zip(block.docids, block.scores))
    if not runs and not empty_ok:
        raise InputError("run file is empty", name)
    return runs


def read_scores(src: Source, empty_ok: bool = False) -> dict[str, dict[str, float]]:
    """A TREC run as evaluation takes it, qid -> docid -> score (no record per line is kept): what ``eval`` holds
    of a run; ``empty_ok``: its stats say its queries were cut to nothing (:func:`run_scores`)."""
    name = source_name(src)
    with open_text(src) as fh:
        return run_scores(numbered(fh), name, empty_ok)


def as_run(runs: dict[str, dict[str, float]], depth: int | None) -> Run:
    """Scores per query as a :class:`Run`: per query, candidates in :func:`trec_order`, the top ``depth`` kept."""
    return Run({q: tuple(trec_order([Candidate(d, s) for d, s in docs.items()])[:depth]) for q, docs in runs.items()})


def read_run(src: Source, depth: int | None = None) -> Run:
    """Read a TREC run; per query, candidates by score desc (ties docid desc), top ``depth`` kept."""
    name = source_name(src)
    with open_text(src) as fh:
        return as_run(run_scores(numbered(fh), name), depth)
