"""BM25 over Lucene through Anserini's Java classes (pyserini's jar), without importing torch.

* :func:`build_index` converts a BEIR-style ``{_id,title,text}`` or Pyserini-style ``{id,contents}``
  JSONL corpus to Anserini ``JsonCollection`` documents (``contents`` = title + " " + text; the title
  is kept beside it in the stored raw JSON) and runs ``IndexCollection`` with positions, doc vectors
  and raw documents stored, as Pyserini's BEIR "flat" indexes are built.
* :func:`retrieve` runs ``SimpleSearcher.batch_search`` with BM25(k1, b) on an index folder or a
  Pyserini prebuilt index name (downloaded into pyserini's cache; needs the network once).
* :func:`fetch_docs` reads the stored raw documents back as :class:`~acurank_cli.records.Doc`.
* :func:`pyserini_topics` / :func:`pyserini_qrels` load Pyserini topic/qrels names (files and
  ``irds:`` names go through :mod:`acurank_cli.retrieval.resolve`, the one resolver).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io.collection_files import doc_from_json, iter_corpus, passage_text, passage_title, read_qrels
from ..io.sources import looks_like_path
from ..records import Candidate, Doc
from .jvm import autoclass, java_error, start_jvm

PathLike = str | Path

#: Pyserini's defaults for BEIR flat indexes (Anserini's BM25 defaults are 0.9 / 0.4 as well).
DEFAULT_K1 = 0.9
DEFAULT_B = 0.4

_CORPUS_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz")


@dataclass(frozen=True)
class IndexStats:
    """What :func:`build_index` did: documents indexed, wall seconds, documents Anserini skipped."""

    docs: int
    seconds: float
    skipped: int = 0


# ---------------------------------------------------------------------------------------- indexing


def _corpus_files(corpus: Path) -> list[Path]:
    if corpus.is_dir():
        files = sorted(p for p in corpus.iterdir() if p.is_file() and p.name.endswith(_CORPUS_SUFFIXES))
        if not files:
            raise InputError(f"no corpus files ({', '.join(_CORPUS_SUFFIXES)}) in this folder", str(corpus))
        return files
    if not corpus.exists():
        raise InputError("no such file", str(corpus))
    return [corpus]


def _collection_records(files: list[Path]) -> Iterator[str]:
    """JsonCollection lines ``{"id", "contents"[, "title"]}`` from BEIR/Pyserini JSONL files."""
    for path in files:
        for doc in iter_corpus(path):
            title = doc.title.strip()
            rec = {"id": doc.docid, "contents": f"{title} {doc.text}" if title else doc.text}
            if title:
                rec["title"] = title
            yield json.dumps(rec, ensure_ascii=False)


def _is_lucene_index(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("segments_*"))


def build_index(
    corpus_path: PathLike, out_dir: PathLike, threads: int = 2, *, optimize: bool = False
) -> IndexStats:
    """Index a JSONL(.gz) corpus (file, or folder of such files) into ``out_dir`` with Anserini.

    ``out_dir`` must be new, empty, or an existing Lucene index (which is replaced, as Anserini
    does). Positions, doc vectors and raw documents are stored; ``optimize`` merges to one segment.
    """
    files = _corpus_files(Path(corpus_path))
    return index_records(lambda: _collection_records(files), corpus_path, out_dir, threads, optimize)


def index_records(records, source: PathLike, out_dir: PathLike, threads: int, optimize: bool, *,
                  collection: str = "JsonCollection", impact: bool = False) -> IndexStats:
    """Check ``out_dir``, stage ``records()`` (JSONL lines from ``source``) and run Anserini's indexer on them:
    the one indexing path of BM25 and impact indexes."""
    started = time.perf_counter()
    if threads < 1:
        raise InputError(f"--threads must be at least 1, not {threads}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", str(out))
    if out.is_dir() and any(out.iterdir()) and not _is_lucene_index(out):
        raise InputError("folder is not empty and holds no Lucene index; pick a new folder", str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    start_jvm()
    staging = Path(tempfile.mkdtemp(prefix=".acurank-jsonl-", dir=out.parent))
    try:
        if stage(records(), staging, threads) == 0:
            raise InputError("holds no documents", str(source))
        indexed, skipped = run_indexer(staging, out, threads, optimize, collection, impact)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if indexed == 0:
        raise InputError(f"no document was indexed ({skipped} empty or unindexable)", str(source))
    return IndexStats(docs=indexed, seconds=time.perf_counter() - started, skipped=skipped)


def stage(records: Iterable[str], staging: Path, threads: int) -> int:
    """Write JSONL records round-robin into ``threads`` files (Anserini indexes a file per thread; empty
    ones are dropped); returns how many were written."""
    shards = [(staging / f"part{i:03d}.jsonl").open("w", encoding="utf-8") for i in range(threads)]
    count = 0
    try:
        for count, rec in enumerate(records, 1):
            shards[count % threads].write(rec + "\n")
    finally:
        for fh in shards:
            fh.close()
    for p in staging.iterdir():
        if p.stat().st_size == 0:
            p.unlink()
    return count


def run_indexer(staging: Path, out: Path, threads: int, optimize: bool, collection: str = "JsonCollection",
                impact: bool = False) -> tuple[int, int]:
    """Anserini's IndexCollection over the staged JSONL files into ``out`` (replaced if it is an index):
    BM25 (positions, doc vectors and raw docs stored) or, with ``impact``, a pretokenized impact index
    (term frequency = weight; raw docs stored). Returns (indexed, skipped)."""
    if _is_lucene_index(out):
        _forget(out)
        shutil.rmtree(out)
    args = autoclass("io.anserini.index.IndexCollection$Args")()
    args.collectionClass = collection
    args.generatorClass = "DefaultLuceneDocumentGenerator"
    args.input = str(staging)
    args.index = str(out)
    args.threads = int(threads)
    if impact:
        args.impact = True
        args.pretokenized = True
    else:
        args.storePositions = True
        args.storeDocvectors = True
    args.storeRaw = True
    args.optimize = bool(optimize)
    args.quiet = os.environ.get("ACURANK_JAVA_LOG", "WARN").upper() not in ("INFO", "DEBUG", "ALL")
    try:
        indexer = autoclass("io.anserini.index.IndexCollection")(args)
        indexer.run()
    except Exception as exc:  # noqa: BLE001 - jnius.JavaException
        raise RuntimeError(f"Anserini indexing failed: {java_error(exc)}") from None
    counters = indexer.getCounters()
    skipped = sum(int(c.get()) for c in (counters.empty, counters.unindexable, counters.skipped, counters.errors))
    return int(counters.indexed.get()), skipped


# ------------------------------------------------------------------------------- opening indexes


#: Open Java searchers by (kind, index as given): BM25 ``SimpleSearcher``s and impact searchers.
_searchers: dict[tuple[str, str], object] = {}
_searchers_lock = threading.Lock()


def _forget(folder: Path) -> None:
    """Close and drop cached searchers on ``folder`` (before it is replaced)."""
    target = folder.resolve()
    with _searchers_lock:
        for key in [k for k in _searchers if Path(k[1]).expanduser().resolve() == target]:
            with contextlib.suppress(Exception):
                _searchers[key].close()
            del _searchers[key]


def cached_searcher(index: PathLike, kind: str, opener, impact: bool = False):
    """The searcher ``opener(folder)`` for an index folder or prebuilt name, opened once per process
    (``kind`` names it in errors and keys the cache; ``impact`` resolves prebuilt impact names)."""
    key = (kind, str(index))
    with _searchers_lock:
        found = _searchers.get(key)
    if found is not None:
        return found
    folder = resolve_index(index, impact)
    start_jvm()
    try:
        made = opener(folder)
    except Exception as exc:  # noqa: BLE001 - jnius.JavaException
        raise InputError(f"cannot open the {kind} ({java_error(exc)})", str(folder)) from None
    with _searchers_lock:
        _searchers.setdefault(key, made)
        return _searchers[key]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Swallow Python and Java chatter (progress bars, 'Downloading ...') so errors stay one line."""
    system = autoclass("java.lang.System")
    sink = autoclass("java.io.PrintStream")(autoclass("java.io.OutputStream").nullOutputStream(), True)
    java_out, java_err = system.out, system.err
    system.setOut(sink)
    system.setErr(sink)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        system.setOut(java_out)
        system.setErr(java_err)


def _prebuilt(name: str, impact: bool = False) -> Path:
    """Local folder of a Pyserini prebuilt Lucene index, BM25 or (``impact``) learned sparse such as
    ``msmarco-v1-passage.splade-pp-ed`` (downloaded into pyserini's cache once)."""
    start_jvm()
    kind = "PrebuiltImpactIndex" if impact else "PrebuiltInvertedIndex"
    entry = autoclass(f"io.anserini.index.prebuilt.{kind}").get(name)
    if entry is None:
        raise InputError(
            f"{name!r} is neither an index folder nor a Pyserini prebuilt {'impact' if impact else 'Lucene'} index "
            f"name (build one with `acurank index{' --impact' if impact else ''} --input CORPUS --index DIR`)"
        )
    cache = os.path.join(
        os.environ.get("PYSERINI_CACHE") or os.path.expanduser(os.path.join("~", ".cache", "pyserini")), "indexes"
    )
    try:
        from pyserini.util import download_prebuilt_index

        with _quiet():  # pyserini prints on stdout (which carries the run) and tqdm bars
            path = download_prebuilt_index(name, verbose=False)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - ValueError, URLError, OSError, ...
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(
            f"prebuilt index {name!r} is not in {cache} and could not be downloaded ({reason}); "
            "offline, build a local index with `acurank index --input CORPUS --index DIR` and pass --index DIR"
        ) from None
    return Path(path)


def resolve_index(index: PathLike, impact: bool = False) -> Path:
    """An index folder, or the cached folder of a Pyserini prebuilt index name (``impact``: an impact index's)."""
    text = str(index)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise InputError("is a file; expected a Lucene index folder", text)
        if not _is_lucene_index(path):
            raise InputError("not a Lucene index (no segments_N file); build one with `acurank index`", text)
        return path
    if isinstance(index, Path) or looks_like_path(text):
        raise InputError("no such index folder", text)
    return _prebuilt(text, impact)


def searcher(index: PathLike):
    """A cached ``io.anserini.search.SimpleSearcher`` for an index folder or prebuilt name."""
    return cached_searcher(index, "Lucene index", lambda folder: autoclass("io.anserini.search.SimpleSearcher")(str(folder)))


def num_docs(index: PathLike) -> int:
    """Documents in the index."""
    return int(searcher(index).get_total_num_docs())


# -------------------------------------------------------------------------------------- retrieval


def _float32(x: float) -> float:
    """The shortest decimal that reads back as the same float32 (Lucene scores are float32).

    Monotone, so order and ties are kept exactly; runs read 6.5988, not 6.598800182342529.
    """
    packed = struct.pack("<f", x)
    for digits in range(1, 10):
        y = float(f"{x:.{digits}g}")
        if struct.pack("<f", y) == packed:
            return y
    return x


def retrieve(
    index: PathLike,
    topics: dict[str, str],
    hits: int = 100,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    threads: int = 2,
) -> dict[str, list[Candidate]]:
    """BM25 top-``hits`` per query, in Anserini's order (score desc, ties by docid).

    Scores are Anserini's: Lucene float32 BM25 rounded to 4 decimals, ties then split by docid
    with tiny decrements (Anserini's ScoreTiesAdjusterReranker), exactly as in Pyserini's runs.
    Every topic gets a key (an empty list when nothing matches, e.g. a stopword-only query).
    """
    if hits < 1:
        raise InputError(f"--hits must be at least 1, not {hits}")
    if threads < 1:
        raise InputError(f"--threads must be at least 1, not {threads}")
    if k1 < 0 or not 0 <= b <= 1:
        raise InputError(f"BM25 needs k1 >= 0 and 0 <= b <= 1 (got k1={k1}, b={b})")
    if not topics:
        return {}
    search = searcher(index)
    array_list = autoclass("java.util.ArrayList")
    queries, qids = array_list(), array_list()
    for qid, text in topics.items():
        qids.add(str(qid))
        queries.add(str(text))
    try:
        search.set_bm25(float(k1), float(b))
        results = search.batch_search(queries, qids, int(hits), int(threads))
    except Exception as exc:  # noqa: BLE001 - jnius.JavaException
        raise RuntimeError(f"Anserini search failed: {java_error(exc)}") from None
    runs: dict[str, list[Candidate]] = {}
    for qid in topics:
        scored = results.get(str(qid))
        runs[qid] = [Candidate(str(h.docid), _float32(h.score)) for h in (scored or ())]
    return runs


# --------------------------------------------------------------------------------- fetching texts


def doc_from_raw(docid: str, raw: str) -> Doc:
    """A Doc from a stored raw document: our JsonCollection JSON, BEIR/Pyserini JSON, or plain text."""
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return Doc(docid, raw)
    if not isinstance(obj, dict):
        return Doc(docid, raw)
    if "_id" in obj or "docid" in obj:
        d = doc_from_json(obj)
        return Doc(docid, d.text, d.title)
    title = passage_title(obj.get("title"))
    if "text" in obj:
        return Doc(docid, passage_text(obj["text"]), title)
    contents = passage_text(obj.get("contents", ""), "contents")
    if title and contents.startswith(title):
        return Doc(docid, contents[len(title):].lstrip(), title)
    return Doc(docid, contents, title if title and not contents else "")


def fetch_docs(index: PathLike, docids: Iterable[str]) -> dict[str, Doc]:
    """Stored documents by docid; docids not in the index are left out of the result."""
    search = searcher(index)
    docs: dict[str, Doc] = {}
    for docid in dict.fromkeys(str(d) for d in docids):
        raw = search.doc_raw(docid)
        if raw is not None:
            try:
                docs[docid] = doc_from_raw(docid, raw)
            except (TypeError, KeyError, ValueError) as exc:
                raise InputError(f"stored document {docid}: {exc}", str(index)) from None
            continue
        lucene_doc = search.doc(docid)
        if lucene_doc is None:
            continue
        contents = lucene_doc.get("contents")
        if contents is None:
            raise InputError(
                "the index stores no document texts (built without -storeRaw/-storeContents); "
                "pass --corpus FILE instead",
                str(index),
            )
        docs[docid] = Doc(docid, str(contents))
    return docs


# ------------------------------------------------------------------------------- topics and qrels


def pyserini_topics(text: str) -> dict[str, str]:
    """Topics of a Pyserini topic name (network or Pyserini's cache)."""
    start_jvm()
    from pyserini.search._base import get_topics, topics_mapping

    if text not in topics_mapping:
        raise InputError(f"{text!r} is neither a topics file nor a Pyserini topic name")
    try:
        with _quiet():
            raw = get_topics(text)
    except Exception as exc:  # noqa: BLE001 - download failure surfaces as a Java IOException
        raise InputError(
            f"Pyserini topics {text!r} could not be loaded ({java_error(exc)}); offline, pass a "
            "topics TSV file (qid<TAB>text) with --topics FILE"
        ) from None
    topics: dict[str, str] = {}
    for qid, fields in raw.items():
        query = fields.get("title") or next((v for v in fields.values() if v), "")
        topics[str(qid)] = " ".join(str(query).split())
    if not topics:
        raise InputError(f"Pyserini topics {text!r} hold no queries")
    return topics


def pyserini_qrels(text: str) -> dict[str, dict[str, int]]:
    """Qrels of a Pyserini qrels name (network or Pyserini's cache)."""
    start_jvm()
    from pyserini.search._base import get_qrels_file, qrels_mapping

    if text not in qrels_mapping:
        raise InputError(f"{text!r} is neither a qrels file nor a Pyserini qrels name")
    try:
        with _quiet():
            path = get_qrels_file(text)
    except Exception as exc:  # noqa: BLE001 - jnius.JavaException
        raise InputError(
            f"Pyserini qrels {text!r} could not be loaded ({java_error(exc)}); offline, pass a TREC "
            "qrels file with --qrels FILE"
        ) from None
    return read_qrels(path)
