"""The one resolver of topics and qrels: a file (``-``, ``.gz`` ok), ``irds:<id>`` (ir_datasets) or a
Pyserini topic/qrels name (downloaded or cached by Pyserini where a network exists). Used by rerank,
eval, report and retrieve alike; the heavy back ends load only when a name needs them. It lives with retrieval
(the names it knows are the datasets' and Pyserini's); the files it reads are :mod:`acurank_cli.io`'s readers."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from ..errors import InputError
from ..io.collection_files import read_qrels, read_topics
from ..io.sources import looks_like_path

PathLike = Union[str, Path]
FILE_SUFFIXES = (".tsv", ".txt", ".gz", ".jsonl", ".json", ".trec")


def as_file(spec: PathLike) -> str | Path | None:
    """The file (or ``-``) that ``spec`` denotes, or None when it is a dataset or Pyserini name."""
    text = str(spec)
    if text == "-":
        return text
    if not isinstance(spec, Path) and text.startswith("irds:"):  # a dataset id holds slashes but is no path
        return None
    if isinstance(spec, Path) or Path(text).expanduser().exists() or looks_like_path(text) or text.endswith(FILE_SUFFIXES):
        return Path(text).expanduser()
    return None


def _resolve(spec: PathLike, kind: str, read_file):
    """``kind`` (topics or qrels) from a file, an ``irds:`` dataset or a Pyserini name."""
    if (path := as_file(spec)) is not None:
        return read_file(path)
    text = str(spec)
    if text.startswith("irds:"):
        from .datasets import load_irds

        found = getattr(load_irds(text), kind)
        if not found:
            raise InputError(f"{text} has no {kind}")
        return found
    from . import lucene

    return getattr(lucene, f"pyserini_{kind}")(text)


def load_topics(spec: PathLike) -> dict[str, str]:
    """Topics (qid -> query text) from a ``qid<TAB>text`` file, ``irds:<id>`` or a Pyserini topic name."""
    return _resolve(spec, "topics", read_topics)


def load_qrels(spec: PathLike) -> dict[str, dict[str, int]]:
    """Qrels from a TREC qrels file, ``irds:<id>`` or a Pyserini qrels name."""
    return _resolve(spec, "qrels", read_qrels)
