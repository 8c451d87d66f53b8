"""Candidate files: a TREC run, or a file that holds each query with its candidates and their passages
(RankGPT JSON, AcuRank JSONL, RankLLM JSONL), recognised by its first record. A TREC run is parsed by
:mod:`.runs` (the one run parser); this module adds the JSON formats and the choice between them."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from dataclasses import dataclass, field
from typing import Callable, Iterator, TextIO

from ..errors import InputError
from ..records import Candidate, Doc
from .collection_files import passage_text, passage_title
from .runs import RunBlock, as_run, packed, run_blocks, run_scores
from .sources import Source, check_id, check_score, json_reason, json_str, open_text, parse_json, source_name


@dataclass
class Bundle:
    """What a candidate file holds: per-query candidates, topics, doc texts and (maybe) qrels."""

    runs: dict[str, tuple[Candidate, ...]] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)
    docs: dict[str, Doc] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, qid: str, query: str, items: list[tuple[Candidate, Doc | None]]) -> None:
        """Add one query's ranked list (file order is kept as first-stage order), checking ids and scores."""
        check_id(qid, "qid", "")
        if qid in self.runs:
            raise ValueError(f"query {qid} appears twice")
        seen: set[str] = set()
        for c, _ in items:
            check_id(c.docid, f"query {qid}: docid", "")
            if c.docid in seen:
                raise ValueError(f"query {qid}: docid {c.docid} repeated")
            seen.add(c.docid)
            check_score(c.score, "", None, f"query {qid} doc {c.docid}: ")
        self.topics[qid] = query
        self.runs[qid] = tuple(c for c, _ in items)
        for _, d in items:
            if d is not None:  # a candidate given without its text: looked up like a run's (--corpus, beside RUN)
                self.docs[d.docid] = d


def _qid(value) -> str:
    """qids as decimal strings, even where a file stores them as integers."""
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise TypeError(f"qid {value!r} is not a string or integer")
    return str(value)


def _score(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{what} score {value!r} is not a number")
    return float(value)


def _grade(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"grade {value!r} is not an integer")
    return int(value)


def _obj(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is a JSON {type(value).__name__}, expected an object")
    return value


def _list(value, what: str) -> list:
    if not isinstance(value, list):
        raise TypeError(f"{what} is a JSON {type(value).__name__}, expected a list")
    return value


def _optional_doc(docid: str, record: dict, names: tuple[str, ...]) -> Doc | None:
    """A candidate's passage when its record has a text field (which must then be a string), else None: a
    candidate file of ids and scores only, whose texts come from --corpus or the passages beside it."""
    title = passage_title(record.get("title"))
    found = next((name for name in names if name in record), None)
    return None if found is None else Doc(docid, passage_text(record[found], found), title)


def _rankgpt(rec: dict, bundle: Bundle) -> None:
    hits = [_obj(h, "a hit") for h in _list(rec["hits"], "'hits'")]
    qid = _qid(hits[0]["qid"]) if hits else _qid(rec.get("qid", ""))
    items = []
    for h in hits:
        docid = json_str(h["docid"], "docid")
        items.append((Candidate(docid, _score(h["score"], docid)), Doc(docid, passage_text(h["content"], "content"))))
    bundle.add(qid, json_str(rec["query"], "query"), items)


def _acurank(rec: dict, bundle: Bundle) -> None:
    qid = _qid(rec["qid"])
    items = []
    for h in _list(rec["bm25_results"], "'bm25_results'"):
        h = _obj(h, "a bm25_results entry")
        docid = json_str(h["pid"], "pid")
        items.append((Candidate(docid, _score(h["bm25_score"], docid)), _optional_doc(docid, h, ("text",))))
    bundle.add(qid, json_str(rec["q_text"], "q_text"), items)
    if rec.get("qrels"):
        qrels = _obj(rec["qrels"], "'qrels'")
        bundle.qrels[qid] = {check_id(json_str(d, "docid"), "docid", ""): _grade(g) for d, g in qrels.items()}


def _rankllm(rec: dict, bundle: Bundle) -> None:
    q = _obj(rec["query"], "'query'")
    items = []
    for c in _list(rec["candidates"], "'candidates'"):
        c = _obj(c, "a candidate")
        doc = _obj(c.get("doc") or {}, "a candidate's 'doc'")
        docid = json_str(c["docid"], "docid")
        items.append((Candidate(docid, _score(c["score"], docid)), _optional_doc(docid, doc, ("segment", "text", "contents"))))
    bundle.add(_qid(q["qid"]), json_str(q["text"], "query text"), items)


@dataclass(frozen=True)
class CandidateFormat:
    """A candidate-file format: how to recognise a record and how to parse the records."""

    name: str
    recognise: Callable[[object], bool]
    parse: Callable[[dict, Bundle], None]


CANDIDATE_FORMATS: tuple[CandidateFormat, ...] = (
    CandidateFormat("rankgpt-json", lambda r: isinstance(r, dict) and "hits" in r, _rankgpt),
    CandidateFormat("acurank-jsonl", lambda r: isinstance(r, dict) and "bm25_results" in r, _acurank),
    CandidateFormat("rankllm-jsonl", lambda r: isinstance(r, dict) and "candidates" in r, _rankllm),
)


def _parse_records(text: str, name: str) -> list[tuple[int | None, object]]:
    """``(line or None, record)`` pairs of a JSON list (no per-record lines) or a JSONL file."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = parse_json(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"bad JSON ({exc.msg})", name, exc.lineno) from None
        except (ValueError, RecursionError) as exc:
            raise InputError(f"bad JSON ({json_reason(exc)})", name) from None
        return [(None, rec) for rec in data]  # text starting with "[" parses to a list or fails
    records = []
    for lineno, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            records.append((lineno, parse_json(line)))
        except (ValueError, RecursionError) as exc:
            raise InputError(f"bad JSON line ({json_reason(exc)})", name, lineno) from None
    return records


def _run_or_json(fh: TextIO) -> tuple[Iterator[tuple[int, str]] | None, str]:
    """Which kind of candidate input an open stream holds, decided by its first non-blank character and read
    no further: (its numbered non-blank lines, "") for a TREC run, (None, its whole text) for JSON."""
    head = []
    for line in fh:
        head.append(line)
        if line.strip():
            break
    if head and head[-1].lstrip()[:1] in ("[", "{"):
        return None, "".join(head) + fh.read()
    return ((i, line) for i, line in enumerate(itertools.chain(head, fh), 1) if line.strip()), ""


@contextlib.contextmanager
def candidate_blocks(src: Source, keep: Callable[[str], bool] = lambda q: True
                     ) -> Iterator[tuple[str, Bundle, Iterator[RunBlock]]]:
    """A run or candidate file for a reader that goes query by query: (format, bundle, blocks). A TREC run is
    streamed (:func:`run_blocks`: only the current query's lines are held; ``keep`` says whose candidates to keep)
    and its bundle is empty; a candidate file (JSON: every query with its texts) is read whole into its bundle
    (topics, texts, qrels) and its queries come as one block each, in file order."""
    name = source_name(src)
    with open_text(src) as fh:
        lines, text = _run_or_json(fh)
        if lines is not None:
            yield "trec", Bundle(), run_blocks(lines, name, keep)
            return
        bundle, fmt = _bundle_of(text, name)
        yield fmt, bundle, (RunBlock(q, *(packed(c) if keep(q) else ((), ())), 0) for q, c in bundle.runs.items())


def read_candidates(src: Source, depth: int | None = None) -> tuple[Bundle, str]:
    """Read a TREC run or a candidate file (RankGPT JSON, AcuRank JSONL, RankLLM JSONL) whole.

    Returns the bundle and the detected format name (``trec`` for a plain run).
    """
    name = source_name(src)
    with open_text(src) as fh:
        lines, text = _run_or_json(fh)
        if lines is not None:
            return Bundle(runs=dict(as_run(run_scores(lines, name), depth))), "trec"
    bundle, fmt = _bundle_of(text, name)
    if depth is not None:
        bundle.runs = {q: c[:depth] for q, c in bundle.runs.items()}
    return bundle, fmt


def _bundle_of(text: str, name: str) -> tuple[Bundle, str]:
    """A candidate file's text parsed, its format recognised by its first record."""
    records = _parse_records(text, name)
    if not records:
        raise InputError("candidate file holds no queries", name)
    fmt = next((f for f in CANDIDATE_FORMATS if f.recognise(records[0][1])), None)
    if fmt is None:
        raise InputError(
            "unrecognised candidate file (expected a TREC run, RankGPT JSON, AcuRank JSONL or "
            "RankLLM JSONL)",
            name,
            1,
        )
    bundle = Bundle()
    for number, (lineno, rec) in enumerate(records, start=1):
        where = "" if lineno is not None else f"query record {number}: "
        try:
            fmt.parse(_obj(rec, "the record"), bundle)
        except InputError as exc:  # an id or score check: the message names query and doc
            raise InputError(f"{where}{exc.message}", name, lineno) from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError, ArithmeticError) as exc:
            raise InputError(f"{where}bad {fmt.name} record ({json_reason(exc)})", name, lineno) from None
    return bundle, fmt.name
