"""Readers that take a path, a text stream or ``-`` (stdin); ``.gz`` files are decompressed."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TextIO, Union

from ..errors import InputError
from ..records import Candidate, Doc

Source = Union[str, Path, TextIO]


def source_name(src: Source) -> str:
    """A printable name for a source: its path, ``<stdin>`` or the stream's name."""
    if isinstance(src, (str, Path)):
        return "<stdin>" if str(src) == "-" else str(src)
    return getattr(src, "name", "<stream>")


@contextlib.contextmanager
def open_text(src: Source) -> Iterator[TextIO]:
    """Open a path (``.gz`` ok), ``-`` for stdin, or pass an open text stream through."""
    if not isinstance(src, (str, Path)):
        yield src
        return
    if str(src) == "-":
        yield sys.stdin
        return
    path = Path(src)
    if not path.exists():
        raise InputError("no such file", str(path))
    if path.is_dir():
        raise InputError("is a directory, expected a file", str(path))
    with path.open("rb") as raw:
        magic = raw.read(2)
    try:
        if magic == b"\x1f\x8b":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                yield fh
        else:
            with path.open("r", encoding="utf-8") as fh:
                yield fh
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text (a binary file?)", str(path)) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"corrupt or truncated gzip file ({exc})", str(path)) from None


def _numbered(fh: TextIO) -> Iterator[tuple[int, str]]:
    for lineno, line in enumerate(fh, start=1):
        if line.strip():
            yield lineno, line.rstrip("\n").rstrip("\r")


def trec_order(cands: list[Candidate]) -> list[Candidate]:
    """Order as trec_eval does: score descending, ties by docid descending."""
    return sorted(cands, key=lambda c: (c.score, c.docid), reverse=True)


def parse_run_lines(lines: Iterator[tuple[int, str]], name: str) -> dict[str, list[Candidate]]:
    """Parse numbered TREC run lines ``qid Q0 docid rank score tag`` into per-query candidates."""
    runs: dict[str, list[Candidate]] = {}
    seen: dict[str, set[str]] = {}
    for lineno, line in lines:
        parts = line.split()
        if len(parts) != 6:
            raise InputError(
                f"expected 6 columns 'qid Q0 docid rank score tag', found {len(parts)}", name, lineno
            )
        qid, _q0, docid, _rank, score_s, _tag = parts
        try:
            score = float(score_s)
        except ValueError:
            raise InputError(f"score {score_s!r} is not a number", name, lineno) from None
        if docid in seen.setdefault(qid, set()):
            raise InputError(f"docid {docid} repeated in query {qid}", name, lineno)
        seen[qid].add(docid)
        runs.setdefault(qid, []).append(Candidate(docid, score))
    return runs


def read_run(src: Source, depth: int | None = None) -> dict[str, tuple[Candidate, ...]]:
    """Read a TREC run; per query, candidates by score desc (ties docid desc), top ``depth`` kept."""
    name = source_name(src)
    with open_text(src) as fh:
        runs = parse_run_lines(_numbered(fh), name)
    if not runs:
        raise InputError("run file is empty", name)
    return {q: tuple(trec_order(c)[:depth]) for q, c in runs.items()}


def read_topics(src: Source) -> dict[str, str]:
    """Read topics ``qid<TAB>text``, one per line."""
    name = source_name(src)
    topics: dict[str, str] = {}
    with open_text(src) as fh:
        for lineno, line in _numbered(fh):
            qid, sep, text = line.partition("\t")
            if not sep or not qid.strip() or not text.strip():
                raise InputError("expected 'qid<TAB>query text'", name, lineno)
            topics[qid.strip()] = text.strip()
    return topics


def read_qrels(src: Source) -> dict[str, dict[str, int]]:
    """Read TREC qrels ``qid iter docid grade``."""
    name = source_name(src)
    qrels: dict[str, dict[str, int]] = {}
    with open_text(src) as fh:
        for lineno, line in _numbered(fh):
            parts = line.split()
            if len(parts) != 4:
                raise InputError(
                    f"expected 4 columns 'qid iter docid grade', found {len(parts)}", name, lineno
                )
            try:
                grade = int(parts[3])
            except ValueError:
                raise InputError(f"grade {parts[3]!r} is not an integer", name, lineno) from None
            qrels.setdefault(parts[0], {})[parts[2]] = grade
    if not qrels:
        raise InputError("qrels file is empty", name)
    return qrels


def doc_from_json(obj: dict) -> Doc:
    """A Doc from a BEIR-style ``{_id,title,text}`` or Pyserini-style ``{id,contents}`` record."""
    if "_id" in obj:
        return Doc(str(obj["_id"]), str(obj.get("text", "")), str(obj.get("title", "") or ""))
    if "id" in obj and "contents" in obj:
        return Doc(str(obj["id"]), str(obj["contents"]))
    if "docid" in obj:
        text = obj.get("text", obj.get("contents", obj.get("segment", "")))
        return Doc(str(obj["docid"]), str(text), str(obj.get("title", "") or ""))
    raise KeyError("expected {_id,title,text} or {id,contents}")


def read_corpus(src: Source, wanted: set[str] | None = None) -> dict[str, Doc]:
    """Read a JSONL corpus (BEIR or Pyserini style); keep only ``wanted`` docids if given."""
    name = source_name(src)
    docs: dict[str, Doc] = {}
    with open_text(src) as fh:
        for lineno, line in _numbered(fh):
            try:
                doc = doc_from_json(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                raise InputError(f"bad corpus record ({exc})", name, lineno) from None
            if wanted is None or doc.docid in wanted:
                docs[doc.docid] = doc
    return docs


# --- candidate files: query + candidates + passages in one file -------------------------------


@dataclass
class Bundle:
    """What a candidate file holds: per-query candidates, topics, doc texts and (maybe) qrels."""

    runs: dict[str, tuple[Candidate, ...]] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)
    docs: dict[str, Doc] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, qid: str, query: str, items: list[tuple[Candidate, Doc]]) -> None:
        """Add one query's ranked list (file order is kept as first-stage order)."""
        self.topics[qid] = query
        self.runs[qid] = tuple(c for c, _ in items)
        for _, d in items:
            self.docs[d.docid] = d


def _qid(value) -> str:
    """qids as decimal strings, even where a file stores them as integers."""
    return str(value)


def _rankgpt(records: list[dict], bundle: Bundle) -> None:
    for rec in records:
        hits = rec["hits"]
        qid = _qid(hits[0]["qid"]) if hits else _qid(rec.get("qid", ""))
        items = [
            (Candidate(str(h["docid"]), float(h["score"])), Doc(str(h["docid"]), str(h["content"])))
            for h in hits
        ]
        bundle.add(qid, str(rec["query"]), items)


def _acurank(records: list[dict], bundle: Bundle) -> None:
    for rec in records:
        qid = _qid(rec["qid"])
        items = [
            (
                Candidate(str(h["pid"]), float(h["bm25_score"])),
                Doc(str(h["pid"]), str(h.get("text", "")), str(h.get("title", "") or "")),
            )
            for h in rec["bm25_results"]
        ]
        bundle.add(qid, str(rec["q_text"]), items)
        if rec.get("qrels"):
            bundle.qrels[qid] = {str(d): int(g) for d, g in rec["qrels"].items()}


def _rankllm(records: list[dict], bundle: Bundle) -> None:
    for rec in records:
        q = rec["query"]
        items = []
        for c in rec["candidates"]:
            doc = c.get("doc") or {}
            text = doc.get("segment", doc.get("text", doc.get("contents", "")))
            items.append(
                (
                    Candidate(str(c["docid"]), float(c["score"])),
                    Doc(str(c["docid"]), str(text), str(doc.get("title", "") or "")),
                )
            )
        bundle.add(_qid(q["qid"]), str(q["text"]), items)


@dataclass(frozen=True)
class CandidateFormat:
    """A candidate-file format: how to recognise a record and how to parse the records."""

    name: str
    recognise: Callable[[object], bool]
    parse: Callable[[list[dict], Bundle], None]


CANDIDATE_FORMATS: tuple[CandidateFormat, ...] = (
    CandidateFormat("rankgpt-json", lambda r: isinstance(r, dict) and "hits" in r, _rankgpt),
    CandidateFormat("acurank-jsonl", lambda r: isinstance(r, dict) and "bm25_results" in r, _acurank),
    CandidateFormat("rankllm-jsonl", lambda r: isinstance(r, dict) and "candidates" in r, _rankllm),
)


def _parse_records(text: str, name: str) -> list[dict]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"bad JSON ({exc.msg})", name, exc.lineno) from None
        if not isinstance(data, list):
            raise InputError("expected a JSON list of queries", name, 1)
        return data
    records = []
    for lineno, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(f"bad JSON line ({exc.msg})", name, lineno) from None
    return records


def read_candidates(src: Source, depth: int | None = None) -> tuple[Bundle, str]:
    """Read a TREC run or a candidate file (RankGPT JSON, AcuRank JSONL, RankLLM JSONL).

    Returns the bundle and the detected format name (``trec`` for a plain run).
    """
    name = source_name(src)
    with open_text(src) as fh:
        text = fh.read()
    first = text.lstrip()[:1]
    if first not in ("[", "{"):
        lines = ((i, l.rstrip("\r")) for i, l in enumerate(text.split("\n"), 1) if l.strip())
        runs = parse_run_lines(lines, name)
        if not runs:
            raise InputError("run file is empty", name)
        return Bundle(runs={q: tuple(trec_order(c)[:depth]) for q, c in runs.items()}), "trec"
    records = _parse_records(text, name)
    if not records:
        raise InputError("candidate file holds no queries", name)
    fmt = next((f for f in CANDIDATE_FORMATS if f.recognise(records[0])), None)
    if fmt is None:
        raise InputError(
            "unrecognised candidate file (expected a TREC run, RankGPT JSON, AcuRank JSONL or "
            "RankLLM JSONL)",
            name,
            1,
        )
    bundle = Bundle()
    try:
        fmt.parse(records, bundle)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise InputError(f"bad {fmt.name} record ({exc!r})", name) from None
    if depth is not None:
        bundle.runs = {q: c[:depth] for q, c in bundle.runs.items()}
    return bundle, fmt.name


def check_scores_positive(runs: dict[str, tuple[Candidate, ...]], name: str) -> None:
    """With ``--init score`` every first-stage score must be a finite positive number."""
    for qid, cands in runs.items():
        for c in cands:
            if not (math.isfinite(c.score) and c.score > 0):
                raise InputError(
                    f"query {qid} doc {c.docid}: first-stage score {c.score} is not positive; "
                    "use --init zscore (or --init uniform)",
                    name,
                )
