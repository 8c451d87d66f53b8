"""``--dataset irds:<id>``: topics, qrels and documents from ir_datasets, or from local files.

ir_datasets downloads on first use into ``IR_DATASETS_HOME`` (default ``~/.ir_datasets``); offline,
:func:`register_local` registers local files under a name that :func:`load_irds` then accepts:

    register_local("local/scifact", "corpus.jsonl.gz", "topics.tsv.gz", "qrels.txt")
    topics, qrels, get_docs = load_irds("irds:local/scifact")

Local files are normalised into ``IR_DATASETS_HOME/acurank-local/<name>/`` (plain TSV documents
are linked, not copied), so ir_datasets' document store is built there and reused by later runs.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import InputError
from ..io.collection_files import iter_corpus, read_qrels, read_topics
from ..io.sources import open_text, source_name
from ..records import Doc

PathLike = str | Path
PREFIX = "irds:"

_registered: dict[str, str] = {}  # name -> fingerprint of the files registered in this process
_open_stores: list = []


def _close_stores() -> None:
    """Close docstores before interpreter teardown (ir_datasets' __del__ fails late in shutdown)."""
    while _open_stores:
        store = _open_stores.pop()
        with contextlib.suppress(Exception):
            lookup = getattr(store, "lookup", None)
            if lookup is not None:
                lookup.close()


atexit.register(_close_stores)


class TitledDoc(NamedTuple):
    """An ir_datasets document with a title (from a BEIR/Pyserini JSONL corpus)."""

    doc_id: str
    title: str
    text: str

    def default_text(self) -> str:
        return f"{self.title} {self.text}" if self.title else self.text


class IrdsDataset(NamedTuple):
    """Topics, qrels (empty when the dataset has none) and a docid -> Doc lookup (None: no docs)."""

    topics: dict[str, str]
    qrels: dict[str, dict[str, int]]
    get_docs: Callable[[Iterable[str]], dict[str, Doc]] | None


def strip_prefix(dataset_id: str) -> str:
    """``irds:beir/scifact/test`` -> ``beir/scifact/test``."""
    return dataset_id.removeprefix(PREFIX)


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """Hold back ir_datasets' INFO/WARNING lines (download retries) so a failure is one line."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _doc_of(item) -> Doc:
    title = str(getattr(item, "title", "") or "")
    text = getattr(item, "text", None)
    if text is None:
        text = item.default_text() if hasattr(item, "default_text") else ""
        if title and text.startswith(title):
            text = text[len(title):].lstrip()
    return Doc(str(item.doc_id), str(text), title)


def _query_text(q) -> str:
    text = getattr(q, "text", None)
    if not isinstance(text, str) and hasattr(q, "default_text"):
        text = q.default_text()
    return " ".join(str(text or "").split())


def load_irds(dataset_id: str) -> IrdsDataset:
    """Topics, qrels and a document getter of an ir_datasets id (``irds:`` prefix optional).

    Downloads happen here (topics/qrels) or on the first ``get_docs`` call (documents); a failed
    download is an :class:`InputError` of one line that says what to pass instead.
    """
    name = strip_prefix(dataset_id.strip())
    if not name:
        raise InputError("empty ir_datasets id (expected e.g. irds:beir/scifact/test)")
    import ir_datasets

    try:
        ds = ir_datasets.load(name)
    except KeyError:
        raise InputError(
            f"unknown ir_datasets id {name!r} (see https://ir-datasets.com; local files: register_local)"
        ) from None
    if not ds.has_queries():
        raise InputError(f"ir_datasets {name!r} has no queries")
    try:
        with _quiet_logs():
            topics = {str(q.query_id): _query_text(q) for q in ds.queries_iter()}
            qrels: dict[str, dict[str, int]] = {}
            if ds.has_qrels():
                for r in ds.qrels_iter():
                    qrels.setdefault(str(r.query_id), {})[str(r.doc_id)] = int(r.relevance)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - requests/urllib/OSError/zip errors while downloading
        raise InputError(
            f"ir_datasets {name!r} could not be loaded ({_reason(exc)}); offline, pass --topics FILE "
            "(qid<TAB>text), or register local files with acurank_cli.retrieval.datasets.register_local"
        ) from None

    get_docs = None
    if ds.has_docs():
        store_box: list = []

        def get_docs(docids: Iterable[str]) -> dict[str, Doc]:
            wanted = [str(d) for d in dict.fromkeys(docids)]
            try:
                if not store_box:
                    store_box.append(ds.docs_store())
                    _open_stores.append(store_box[0])
                found = store_box[0].get_many(wanted)
            except Exception as exc:  # noqa: BLE001 - download or docstore errors
                raise InputError(
                    f"ir_datasets {name!r}: documents could not be loaded ({_reason(exc)}); "
                    "pass --corpus FILE or --index DIR instead"
                ) from None
            return {str(k): _doc_of(v) for k, v in found.items()}

    return IrdsDataset(topics, qrels, get_docs)


# ------------------------------------------------------------------------------------ local files


def _fingerprint(paths: Iterable[Path | None]) -> str:
    h = hashlib.sha1()
    for p in paths:
        if p is None:
            h.update(b"-\n")
            continue
        st = p.stat()
        h.update(f"{p.resolve()}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _first_line(path: Path) -> str:
    with open_text(path) as fh:
        for line in fh:
            if line.strip():
                return line.strip()
    return ""


def _clean(text: str) -> str:
    return " ".join(str(text).split())


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _prepare_docs(src: Path, folder: Path):
    """An ir_datasets docs component over ``src`` (JSONL -> 3-column TSV; plain TSV is linked)."""
    from ir_datasets.formats import GenericDoc, TsvDocs
    from ir_datasets.util import LocalDownload

    name = source_name(src)
    if _first_line(src).startswith("{"):
        target = folder / "docs.tsv"
        with target.open("w", encoding="utf-8") as out:
            for d in iter_corpus(src):
                out.write(f"{_clean(d.docid)}\t{_clean(d.title)}\t{_clean(d.text)}\n")
        return TsvDocs(LocalDownload(target), doc_cls=TitledDoc)
    target = folder / "docs.tsv"
    with open_text(src) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                if len(line.rstrip("\n").split("\t")) != 2:
                    raise InputError("expected documents as JSONL or TSV 'docid<TAB>text'", name, lineno)
                break
    if _is_gzip(src):
        with open_text(src) as fh, target.open("w", encoding="utf-8") as out:
            shutil.copyfileobj(fh, out)
    else:
        target.symlink_to(src.resolve())
    return TsvDocs(LocalDownload(target), doc_cls=GenericDoc)


def _components(folder: Path, docs_path: Path | None, qrels_path: Path | None, fresh: bool) -> list:
    """The ir_datasets components over ``folder``: the documents (converted when ``fresh``), queries and qrels."""
    from ir_datasets.formats import GenericDoc, TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    components = []
    if docs_path is not None:
        if fresh:
            components.append(_prepare_docs(docs_path, folder))
        else:
            titled = len(_first_line(folder / "docs.tsv").split("\t")) == 3
            components.append(TsvDocs(LocalDownload(folder / "docs.tsv"), doc_cls=TitledDoc if titled else GenericDoc))
    components.append(TsvQueries(LocalDownload(folder / "queries.tsv")))
    if qrels_path is not None:
        components.append(TrecQrels(LocalDownload(folder / "qrels.txt"), {}))
    return components


def _copy_queries_and_qrels(folder: Path, queries_path: Path, qrels_path: Path | None) -> None:
    """A fresh ``folder`` holding the queries (``queries.tsv``) and qrels (``qrels.txt``) as ir_datasets reads them,
    each read (and checked) by acurank's own readers."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    topics = read_topics(queries_path)
    with (folder / "queries.tsv").open("w", encoding="utf-8") as out:
        for qid, text in topics.items():
            out.write(f"{_clean(qid)}\t{_clean(text)}\n")
    if qrels_path is not None:
        judged = read_qrels(qrels_path)
        with (folder / "qrels.txt").open("w", encoding="utf-8") as out:
            for qid, grades in judged.items():
                for docid, grade in grades.items():
                    out.write(f"{qid} 0 {docid} {grade}\n")


def register_local(
    name: str,
    docs: PathLike | None,
    queries_tsv: PathLike,
    qrels: PathLike | None = None,
) -> str:
    """Register local files as ir_datasets ``name``; returns ``irds:<name>`` for ``--dataset``.

    ``docs``: JSONL (BEIR ``{_id,title,text}`` or Pyserini ``{id,contents}``) or TSV ``docid<TAB>text``
    (.gz ok; None for no documents); ``queries_tsv``: ``qid<TAB>text`` (.gz ok); ``qrels``: TREC
    qrels. Registering the same name with the same files again is a no-op.
    """
    name = strip_prefix(name.strip())
    if not name:
        raise InputError("empty dataset name")
    paths = [Path(p).expanduser() if p is not None else None for p in (docs, queries_tsv, qrels)]
    for p in paths:
        if p is not None and not p.is_file():
            raise InputError("no such file", str(p))
    fingerprint = _fingerprint(paths)
    if _registered.get(name) == fingerprint:
        return PREFIX + name

    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.util import home_path

    if name in _registered:
        raise InputError(f"dataset name {name!r} is already registered with other files; pick another name")
    if name in set(ir_datasets.registry):
        raise InputError(f"dataset name {name!r} is taken by ir_datasets; pick another name (e.g. local/{name})")

    folder = Path(home_path()) / "acurank-local" / re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    stamp = folder / "source.json"
    try:
        fresh = json.loads(stamp.read_text(encoding="utf-8")).get("fingerprint") != fingerprint
    except (OSError, json.JSONDecodeError, AttributeError):
        fresh = True
    docs_path, queries_path, qrels_path = paths
    if fresh:
        _copy_queries_and_qrels(folder, queries_path, qrels_path)
    components = _components(folder, docs_path, qrels_path, fresh)
    if fresh:
        stamp.write_text(json.dumps({"name": name, "fingerprint": fingerprint}), encoding="utf-8")
    try:
        ir_datasets.registry.register(name, Dataset(*components))
    except RuntimeError as exc:
        raise InputError(f"cannot register {name!r} ({exc})") from None
    _registered[name] = fingerprint
    return PREFIX + name
