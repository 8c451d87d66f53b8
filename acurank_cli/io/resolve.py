"""The one resolver of topics and qrels: a file (``-``, ``.gz`` ok), ``irds:<id>`` (ir_datasets) or a
Pyserini topic/qrels name (downloaded or cached by Pyserini where a network exists). Used by rerank,
eval, report and retrieve alike; the heavy back ends load only when a name needs them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

from ..errors import InputError
from .readers import read_qrels, read_topics

PathLike = Union[str, Path]
FILE_SUFFIXES = (".tsv", ".txt", ".gz", ".jsonl", ".json", ".trec")


def looks_like_path(text: str) -> bool:
    """Whether a name is meant as a path (a separator, ``.``/``~`` prefix, or empty)."""
    return any(sep in text for sep in ("/", os.sep)) or text.startswith((".", "~")) or text == ""


def as_file(spec: PathLike) -> str | Path | None:
    """The file (or ``-``) that ``spec`` denotes, or None when it is a dataset or Pyserini name."""
    text = str(spec)
    if text == "-":
        return text
    if isinstance(spec, Path) or Path(text).expanduser().exists() or looks_like_path(text) or text.endswith(FILE_SUFFIXES):
        return Path(text).expanduser()
    return None


def load_topics(spec: PathLike) -> dict[str, str]:
    """Topics (qid -> query text) from a ``qid<TAB>text`` file, ``irds:<id>`` or a Pyserini topic name."""
    if (path := as_file(spec)) is not None:
        return read_topics(path)
    text = str(spec)
    if text.startswith("irds:"):
        from ..retrieval.datasets import load_irds

        topics = load_irds(text).topics
        if not topics:
            raise InputError(f"{text} has no topics")
        return topics
    from ..retrieval.lucene import pyserini_topics

    return pyserini_topics(text)


def load_qrels(spec: PathLike) -> dict[str, dict[str, int]]:
    """Qrels from a TREC qrels file, ``irds:<id>`` or a Pyserini qrels name."""
    if (path := as_file(spec)) is not None:
        return read_qrels(path)
    text = str(spec)
    if text.startswith("irds:"):
        from ..retrieval.datasets import load_irds

        qrels = load_irds(text).qrels
        if not qrels:
            raise InputError(f"{text} has no qrels")
        return qrels
    from ..retrieval.lucene import pyserini_qrels

    return pyserini_qrels(text)
