"""The test collection's own files: topics (``qid<TAB>text``), qrels (``qid iter docid grade``), a JSONL corpus
(BEIR or Pyserini style) and the ``--qids`` lists; each read from a path, a stream or ``-``."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..records import Doc, visible
from .sources import Source, check_id, json_reason, json_str, numbered, open_text, parse_json, source_name


def read_topics(src: Source, what: tuple[str, str] = ("topic", "query text")) -> dict[str, str]:
    """Read topics ``qid<TAB>text``, one per line (``what``: what a line and its text are called in a refusal; a
    pivot file's are a pivot and its passage)."""
    name = source_name(src)
    topics: dict[str, str] = {}
    line_is, text_is = what
    with open_text(src) as fh:
        for lineno, line in numbered(fh):
            qid, sep, text = line.partition("\t")
            if sep and qid.strip() and not visible(text):  # the tab is there: the text is what is missing
                raise InputError(f"{line_is} {qid.strip()} has no {text_is} after its tab", name, lineno)
            if not sep or not qid.strip():
                raise InputError(f"expected 'qid<TAB>{text_is}'", name, lineno)
            qid = check_id(qid.strip(), "qid", name, lineno)
            if topics.get(qid, text.strip()) != text.strip():
                raise InputError(f"{line_is} {qid} given twice with different texts", name, lineno)
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
            qids = {check_id(line.split()[0], "qid", name, lineno) for lineno, line in numbered(fh)}
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
        for lineno, line in numbered(fh):
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
    return Doc(json_str(obj[key], key), passage_text(obj[field_name], field_name), passage_title(obj.get("title")))


def iter_corpus(src: Source) -> Iterator[Doc]:
    """The one corpus iterator: the docs of a JSONL corpus (BEIR ``{_id,title,text}`` or Pyserini
    ``{id,contents}``) in file order, each record checked (one line naming file and line when bad)."""
    for _, doc in _numbered_corpus(src):
        yield doc


def _numbered_corpus(src: Source) -> Iterator[tuple[int, Doc]]:
    name = source_name(src)
    with open_text(src) as fh:
        for lineno, line in numbered(fh):
            try:
                doc = doc_from_json(parse_json(line))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                raise InputError(f"bad corpus record ({json_reason(exc)})", name, lineno) from None
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
