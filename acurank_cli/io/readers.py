"""Readers that take a path, a text stream or ``-`` (stdin); ``.gz`` files are decompressed."""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import math
import os
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Sequence, TextIO, Union

from ..errors import InputError
from ..records import Candidate, Doc, Run

Source = Union[str, Path, TextIO]



def looks_like_path(text: str) -> bool:
    """Whether a name is meant as a path (a separator, ``.``/``~`` prefix, or empty), not a dataset, topic
    or prebuilt index name."""
    return any(sep in text for sep in ("/", os.sep)) or text.startswith((".", "~")) or text == ""

def source_name(src: Source) -> str:
    """A printable name for a source: its path, ``<stdin>`` or the stream's name."""
    if isinstance(src, (str, Path)):
        return "<stdin>" if str(src) == "-" else str(src)
    return getattr(src, "name", "<stream>")


def one_stdin(named: Sequence[tuple[str, object]]) -> None:
    """Standard input can feed one input of a command: an InputError naming the inputs (e.g. ``RUN and --qrels``)
    when ``named`` ((name, source) pairs, None for not given) gives ``-`` to more than one."""
    readers = [name for name, src in named if isinstance(src, str) and src == "-"]
    if len(readers) > 1:
        who = " and ".join(readers) if len(set(readers)) == len(readers) else f"{len(readers)} inputs"
        raise InputError(f"'-' (standard input) can be only one input, and {who} name it: give the others as files")


class _Prefixed(io.RawIOBase):
    """A stream's first bytes, already read to sniff its kind, put back in front of the rest of it."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n], self._head = self._head[:n], self._head[n:]
            return n
        return self._rest.readinto(buffer)


def _sniffed(raw: BinaryIO) -> tuple[BinaryIO, bool]:
    """The stream, still at its first byte, and whether it is gzip: its first two bytes are looked at without
    being consumed (a peek, or a read put back in front), so a pipe, a FIFO or ``/dev/stdin`` loses nothing."""
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if len(head) < 2:  # no look-ahead, or a pipe that delivered one byte so far: read two, put them back
        first = raw.read(2) or b""
        while 0 < len(first) < 2 and (more := raw.read(2 - len(first))):
            first += more
        head, raw = first, io.BufferedReader(_Prefixed(first, raw))
    return raw, head == b"\x1f\x8b"


def _stdin_bytes() -> BinaryIO:
    stdin = sys.stdin
    if stdin is None:
        raise InputError("no standard input to read ('-')", "<stdin>")
    return getattr(stdin, "buffer", None) or io.BytesIO(stdin.read().encode("utf-8"))  # a text-only stream: its text


@contextlib.contextmanager
def open_text(src: Source) -> Iterator[TextIO]:
    """The one way in: a path, ``-`` (stdin) or an open text stream (passed through). A path is opened once
    (a FIFO, ``/dev/stdin`` or a process substitution ``<(...)`` has no second reading) and, like stdin, is
    gunzipped when its first bytes are gzip's, whatever its name; text is UTF-8 (a byte-order mark dropped)."""
    if not isinstance(src, (str, Path)):
        yield src
        return
    name = source_name(src)
    with contextlib.ExitStack() as stack:
        if str(src) == "-":
            raw = _stdin_bytes()
        else:
            path = Path(src)
            if path.is_dir():
                raise InputError("is a directory, expected a file", name)
            try:
                raw = stack.enter_context(path.open("rb"))
            except FileNotFoundError:
                raise InputError("no such file", name) from None
            except OSError as exc:
                raise InputError(f"cannot read ({exc.strerror or exc})", name) from None
        try:
            raw, gz = _sniffed(raw)
            binary = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
            text = io.TextIOWrapper(binary, encoding="utf-8-sig")
            try:
                yield text
            finally:
                text.detach()  # the file itself is closed by the stack; stdin stays open
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text (a binary file?)", name) from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"corrupt or truncated gzip file ({exc})", name) from None
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror or exc})", name) from None


def check_id(value: str, what: str, name: str, line: int | None = None) -> str:
    """A qid or docid: non-empty, printable, no whitespace (it must survive a TREC line). Every whitespace
    character but the ASCII space is non-printable to ``str.isprintable``, so the check runs in C."""
    if not value or not value.isprintable() or " " in value:
        raise InputError(f"{what} {value!r} is empty or holds whitespace or control characters", name, line)
    return value


def check_tag(tag: str, flag: str = "--tag") -> str:
    """A run tag, the sixth column of every TREC line: non-empty, printable, no whitespace."""
    if not tag or not tag.isprintable() or " " in tag:
        raise InputError(f"{flag} {tag!r}: a run tag must be non-empty, without whitespace or control characters "
                         "(it is a column of every TREC run line)")
    return tag


def check_score(value: float, name: str, line: int | None = None, where: str = "") -> float:
    """A first-stage score: a finite number."""
    if not math.isfinite(value):
        raise InputError(f"{where}score {value} is not a finite number", name, line)
    return value


def _numbered(fh: TextIO) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their numbers; line ends are left to the parsers, which split or strip."""
    for lineno, line in enumerate(fh, start=1):
        if line.strip():
            yield lineno, line


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


def _run_line(lineno: int, line: str, name: str) -> tuple[str, Candidate]:
    """One TREC run line ``qid Q0 docid rank score tag``, checked: (qid, candidate)."""
    qid, docid, score = _run_fields(lineno, line, name)
    return qid, Candidate(docid, score)


def _run_fields(lineno: int, line: str, name: str) -> tuple[str, str, float]:
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
    check_score(score, name, lineno)
    return qid, docid, score


def parse_run_lines(lines: Iterator[tuple[int, str]], name: str) -> dict[str, list[Candidate]]:
    """Parse numbered TREC run lines ``qid Q0 docid rank score tag`` into per-query candidates."""
    runs: dict[str, list[Candidate]] = {}
    seen: dict[str, set[str]] = {}
    for lineno, line in lines:
        qid, cand = _run_line(lineno, line, name)
        if cand.docid in seen.setdefault(qid, set()):
            raise InputError(f"docid {cand.docid} repeated in query {qid}", name, lineno)
        seen[qid].add(cand.docid)
        runs.setdefault(qid, []).append(cand)
    return runs


def read_scores(src: Source) -> dict[str, dict[str, float]]:
    """A TREC run as evaluation takes it, qid -> docid -> score, read line by line into that one mapping (each line
    checked as :func:`parse_run_lines` checks it; no record per line is kept): what ``eval`` holds of a run."""
    name = source_name(src)
    runs: dict[str, dict[str, float]] = {}
    with open_text(src) as fh:
        for lineno, line in _numbered(fh):
            qid, docid, score = _run_fields(lineno, line, name)
            docs = runs.setdefault(qid, {})
            if docid in docs:
                raise InputError(f"docid {docid} repeated in query {qid}", name, lineno)
            docs[docid] = score
    if not runs:
        raise InputError("run file is empty", name)
    return runs


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


def run_blocks(lines: Iterator[tuple[int, str]], name: str, keep: Callable[[str], bool] = lambda q: True
               ) -> Iterator[RunBlock]:
    """A TREC run read as it comes, one block of a query's consecutive lines at a time, every line checked as
    :func:`parse_run_lines` checks it (a docid repeated within a block too; across the blocks of a query that is
    not grouped, whoever joins them checks). Only the current block is held; the candidates of a query ``keep``
    refuses are checked and dropped (the block comes with none)."""
    qid, docids, scores, seen, start, wanted = None, [], [], set(), 0, False
    done: set[str] = set()
    for lineno, line in lines:
        q, docid, score = _run_fields(lineno, line, name)
        if q != qid:
            if qid is not None:
                yield RunBlock(qid, tuple(docids), tuple(scores), start, qid in done)
                done.add(qid)
            qid, docids, scores, seen, start = q, [], [], set(), lineno
            wanted = keep(q)
        if docid in seen:
            raise InputError(f"docid {docid} repeated in query {q}", name, lineno)
        seen.add(docid)
        if wanted:
            docids.append(docid)
            scores.append(score)
    if qid is not None:
        yield RunBlock(qid, tuple(docids), tuple(scores), start, qid in done)


def _as_run(runs: dict[str, list[Candidate]], name: str, depth: int | None) -> Run:
    if not runs:
        raise InputError("run file is empty", name)
    return Run({q: tuple(trec_order(c)[:depth]) for q, c in runs.items()})


def read_run(src: Source, depth: int | None = None) -> Run:
    """Read a TREC run; per query, candidates by score desc (ties docid desc), top ``depth`` kept."""
    name = source_name(src)
    with open_text(src) as fh:
        return _as_run(parse_run_lines(_numbered(fh), name), name, depth)


def read_topics(src: Source) -> dict[str, str]:
    """Read topics ``qid<TAB>text``, one per line."""
    name = source_name(src)
    topics: dict[str, str] = {}
    with open_text(src) as fh:
        for lineno, line in _numbered(fh):
            qid, sep, text = line.partition("\t")
            if not sep or not qid.strip() or not text.strip():
                raise InputError("expected 'qid<TAB>query text'", name, lineno)
            qid = check_id(qid.strip(), "qid", name, lineno)
            if topics.get(qid, text.strip()) != text.strip():
                raise InputError(f"topic {qid} given twice with different texts", name, lineno)
            topics[qid] = text.strip()
    return topics


def _readable_file(text: str) -> bool:
    """An existing path that is not a folder: a file, a FIFO or a process substitution (``<(...)``)."""
    try:
        path = Path(text)
        return path.exists() and not path.is_dir()
    except (OSError, ValueError):  # not a possible path (too long, NUL)
        return False


def qids_file(spec: str | None) -> str | None:
    """The file ``--qids`` reads (``@FILE``, or a single word naming an existing file), or None (ids)."""
    if spec is None:
        return None
    if spec.startswith("@"):
        return spec[1:]
    return spec if "," not in spec and (spec == "-" or _readable_file(spec)) else None


def read_qids(spec: str) -> set[str]:
    """``--qids``: ``@FILE`` (the first column of each line: a qid list or a topics file; ``@-`` stdin), ids
    ``1,2,3`` (a list, however long: never tried as a path), or a single word that names an existing file
    (read as ``@FILE``) or one id. An empty value (an unset ``$QIDS`` in a script) is an error, never "all"."""
    path = qids_file(spec)
    if spec.startswith("@") and path != "-" and not _readable_file(path):
        raise InputError("no such file", f"--qids @{path}")
    if path is not None:
        name = source_name(path)
        with open_text(path) as fh:
            qids = {check_id(line.split()[0], "qid", name, lineno) for lineno, line in _numbered(fh)}
    else:
        qids = {check_id(q.strip(), "qid", "--qids") for q in spec.split(",") if q.strip()}
    if not qids:
        raise InputError(f"no query ids given{' (an empty value)' if not spec.strip() else ''}", "--qids")
    return qids


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
            judged = qrels.setdefault(check_id(parts[0], "qid", name, lineno), {})
            if judged.get(parts[2], grade) != grade:
                raise InputError(f"query {parts[0]} doc {parts[2]} judged twice with different grades", name, lineno)
            judged[check_id(parts[2], "docid", name, lineno)] = grade
    if not qrels:
        raise InputError("qrels file is empty", name)
    return qrels


def _json(text: str):
    """``json.loads`` (its errors are ValueError, or RecursionError for absurd nesting)."""
    return json.loads(text)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def passage_text(value: object, what: str = "text") -> str:
    """A passage's text as a record gives it: a string (empty is a passage with no words). Anything else (null,
    a number, an object, a list, a float NaN from a data frame) is a TypeError naming the field and what it is,
    never read as ``"None"`` or an object's repr. Every reader and integration takes its texts through this."""
    if not isinstance(value, str):
        shown = repr(value)
        raise TypeError(f"{what} {shown if len(shown) <= 40 else shown[:37] + '...'} is not a string")
    return value


def passage_title(value: object, what: str = "title") -> str:
    """A passage's optional title: a string, or absent / null (no title)."""
    return "" if value is None else passage_text(value, what)


def _first_field(obj: dict, names: tuple[str, ...]) -> str:
    """The first of ``names`` the record has (a KeyError naming the first when it has none)."""
    for name in names:
        if name in obj:
            return name
    raise KeyError(names[0])


def doc_from_json(obj: dict) -> Doc:
    """A Doc from a BEIR-style ``{_id,title,text}``, Pyserini-style ``{id,contents}`` or ``{docid,text|contents|
    segment}`` record; the text must be there and be a string, the title a string or absent / null."""
    if not isinstance(obj, dict):
        raise TypeError(f"a JSON {type(obj).__name__}, expected an object")
    if "_id" in obj:
        key, names = "_id", ("text",)
    elif "id" in obj and "contents" in obj:
        key, names = "id", ("contents",)
    elif "docid" in obj:
        key, names = "docid", ("text", "contents", "segment")
    else:
        raise ValueError("expected {_id,title,text} or {id,contents}")
    field_name = _first_field(obj, names)
    return Doc(_str(obj[key], key), passage_text(obj[field_name], field_name), passage_title(obj.get("title")))


def iter_corpus(src: Source) -> Iterator[Doc]:
    """The one corpus iterator: the docs of a JSONL corpus (BEIR ``{_id,title,text}`` or Pyserini
    ``{id,contents}``) in file order, each record checked (one line naming file and line when bad)."""
    for _, doc in _numbered_corpus(src):
        yield doc


def _numbered_corpus(src: Source) -> Iterator[tuple[int, Doc]]:
    name = source_name(src)
    with open_text(src) as fh:
        for lineno, line in _numbered(fh):
            try:
                doc = doc_from_json(_json(line))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                raise InputError(f"bad corpus record ({_reason(exc)})", name, lineno) from None
            check_id(doc.docid, "docid", name, lineno)
            yield lineno, doc


def read_corpus(src: Source, wanted: set[str] | None = None) -> dict[str, Doc]:
    """Read a JSONL corpus (BEIR or Pyserini style); keep only ``wanted`` docids if given. A docid kept twice
    with different texts is an error naming both lines (which one a run meant cannot be known); a repeated
    identical record is harmless."""
    out: dict[str, Doc] = {}
    first: dict[str, int] = {}
    for lineno, doc in _numbered_corpus(src):
        if wanted is not None and doc.docid not in wanted:
            continue
        if doc.docid in out and out[doc.docid] != doc:
            raise InputError(f"docid {doc.docid} appears twice with different texts (lines {first[doc.docid]} and "
                             f"{lineno})", source_name(src), lineno)
        first.setdefault(doc.docid, lineno)
        out[doc.docid] = doc
    return out


# --- candidate files: query + candidates + passages in one file -------------------------------


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


def _str(value, what: str) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise TypeError(f"{what} {value!r} is not a string")
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
        docid = _str(h["docid"], "docid")
        items.append((Candidate(docid, _score(h["score"], docid)), Doc(docid, passage_text(h["content"], "content"))))
    bundle.add(qid, _str(rec["query"], "query"), items)


def _acurank(rec: dict, bundle: Bundle) -> None:
    qid = _qid(rec["qid"])
    items = []
    for h in _list(rec["bm25_results"], "'bm25_results'"):
        h = _obj(h, "a bm25_results entry")
        docid = _str(h["pid"], "pid")
        items.append((Candidate(docid, _score(h["bm25_score"], docid)), _optional_doc(docid, h, ("text",))))
    bundle.add(qid, _str(rec["q_text"], "q_text"), items)
    if rec.get("qrels"):
        qrels = _obj(rec["qrels"], "'qrels'")
        bundle.qrels[qid] = {check_id(_str(d, "docid"), "docid", ""): _grade(g) for d, g in qrels.items()}


def _rankllm(rec: dict, bundle: Bundle) -> None:
    q = _obj(rec["query"], "'query'")
    items = []
    for c in _list(rec["candidates"], "'candidates'"):
        c = _obj(c, "a candidate")
        doc = _obj(c.get("doc") or {}, "a candidate's 'doc'")
        docid = _str(c["docid"], "docid")
        items.append((Candidate(docid, _score(c["score"], docid)), _optional_doc(docid, doc, ("segment", "text", "contents"))))
    bundle.add(_qid(q["qid"]), _str(q["text"], "query text"), items)


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
            data = _json(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"bad JSON ({exc.msg})", name, exc.lineno) from None
        except (ValueError, RecursionError) as exc:
            raise InputError(f"bad JSON ({_reason(exc)})", name) from None
        return [(None, rec) for rec in data]  # text starting with "[" parses to a list or fails
    records = []
    for lineno, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            records.append((lineno, _json(line)))
        except (ValueError, RecursionError) as exc:
            raise InputError(f"bad JSON line ({_reason(exc)})", name, lineno) from None
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
            return Bundle(runs=dict(_as_run(parse_run_lines(lines, name), name, depth))), "trec"
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
            raise InputError(f"{where}bad {fmt.name} record ({_reason(exc)})", name, lineno) from None
    return bundle, fmt.name
