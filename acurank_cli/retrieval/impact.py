"""Learned sparse (impact) retrieval through Anserini: SPLADE++ ED, uniCOIL and any JsonVectorCollection.

* :func:`build_impact_index` indexes a Pyserini ``JsonVectorCollection`` (JSONL ``{"id", "contents",
  "vector": {term: weight}}``, weights already quantized to integers, as Pyserini's encoded corpora are)
  with ``IndexCollection -impact -pretokenized``: a term's frequency in a document is its weight.
* :func:`retrieve_impact` scores a query ``{term: weight}`` as Anserini's ``SimpleImpactSearcher`` does:
  the sum over query terms of query weight x document weight (ImpactSimilarity), top ``hits``, ties by
  docid. As Pyserini's ``LuceneImpactSearcher`` (min_idf 0), query terms found in every document (idf 0)
  or in none are dropped.
* Query weights come pre-encoded (:func:`read_encoded_queries`: JSONL ``{"id" or "qid", "vector"}``) or
  from a query encoder (:func:`encode_queries`: Pyserini's SPLADE / uniCOIL encoders, torch; a hub id such
  as ``naver/splade-cocondenser-ensembledistil`` is downloaded once, a local folder is read).
* Prebuilt impact indexes (``msmarco-v1-passage.splade-pp-ed``) resolve like prebuilt BM25 indexes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io.sources import open_text
from ..records import Candidate
from .jvm import autoclass, java_error
from .lucene import IndexStats, PathLike, _corpus_files, _float32, cached_searcher, index_records

#: term -> integer weight
Vector = dict[str, int]


def _weights(raw: object, where: str, path: str) -> Vector:
    """A {term: weight} object with non-negative integral weights (JSON floats such as 12.0 pass)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: 'vector' must be an object {{term: weight}}", path)
    out: Vector = {}
    for term, w in raw.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0 or w != int(w):
            raise InputError(f"{where}: weight of {term!r} is {w!r}; impact weights are integers >= 0 "
                             "(quantize them, e.g. round(100 * w), as Pyserini's encoders do)", path)
        if int(w) > 0:
            out[str(term)] = int(w)
    return out


def _vector_records(files: list[Path]) -> Iterator[str]:
    """JsonVectorCollection lines from the input files, each checked (file and line named on error)."""
    for path in files:
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                rec = _json_line(line, lineno, path)
                docid = rec.get("id", rec.get("_id", rec.get("docid")))
                if docid is None:
                    raise InputError(f"line {lineno}: expected {{\"id\", \"contents\", \"vector\"}}", str(path))
                vector = _weights(rec.get("vector"), f"line {lineno}", str(path))
                yield json.dumps({"id": str(docid), "contents": str(rec.get("contents", "")), "vector": vector},
                                 ensure_ascii=False)


def _json_line(line: str, lineno: int, path: PathLike) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"line {lineno}: not JSON ({exc.msg})", str(path)) from None
    if not isinstance(rec, dict):
        raise InputError(f"line {lineno}: expected a JSON object", str(path))
    return rec


def build_impact_index(vectors: PathLike, out_dir: PathLike, threads: int = 2, *, optimize: bool = False) -> IndexStats:
    """Index a JsonVectorCollection JSONL(.gz) file or folder of them into ``out_dir`` (raw docs stored)."""
    files = _corpus_files(Path(vectors))
    return index_records(lambda: _vector_records(files), vectors, out_dir, threads, optimize,
                         collection="JsonVectorCollection", impact=True)


def read_encoded_queries(path: PathLike) -> dict[str, Vector]:
    """Pre-encoded queries: JSONL ``{"id" or "qid", "vector": {term: weight}}`` (file order kept)."""
    out: dict[str, Vector] = {}
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"line {lineno}"
            rec = _json_line(line, lineno, path)
            qid = rec.get("qid", rec.get("id"))
            if qid is None or "vector" not in rec:
                raise InputError(f"{where}: expected {{\"qid\" (or \"id\"), \"vector\": {{term: weight}}}}", str(path))
            if str(qid) in out:
                raise InputError(f"{where}: query {qid} appears twice", str(path))
            out[str(qid)] = _weights(rec["vector"], where, str(path))
    if not out:
        raise InputError("holds no encoded queries", str(path))
    return out


def encode_queries(encoder: str, topics: dict[str, str]) -> dict[str, Vector]:
    """Encode query texts with Pyserini's learned sparse query encoders (SPLADE or uniCOIL; needs torch and
    transformers; a hub id is downloaded once into the Hugging Face cache)."""
    name = encoder.lower()
    try:
        if "splade" in name:
            from pyserini.encode import SpladeQueryEncoder as Encoder
        elif "unicoil" in name:
            from pyserini.encode import UniCoilQueryEncoder as Encoder
        else:
            raise InputError(f"--encoder {encoder}: a SPLADE or uniCOIL query encoder (name or folder) is expected; "
                             "for other encoders pass --encoded-queries FILE")
    except ImportError as exc:
        raise InputError(f"--encoder needs pyserini with torch and transformers ({exc})") from None
    try:
        model = Encoder(encoder)
    except Exception as exc:  # noqa: BLE001 - OSError (offline hub), ValueError, ...
        first = (" ".join(str(exc).split()) or type(exc).__name__)[:200]
        raise InputError(f"--encoder {encoder}: cannot load it ({first}); offline, pass a local folder or "
                         "--encoded-queries FILE") from None
    return {qid: {t: int(w) for t, w in model.encode(text).items() if int(w) > 0} for qid, text in topics.items()}


@dataclass(frozen=True)
class _ImpactIndex:
    """An open impact index: Anserini's searcher and a Lucene reader (for document frequencies)."""

    searcher: object
    reader: object

    def close(self) -> None:
        self.searcher.close()
        self.reader.close()


def _open(index: PathLike) -> _ImpactIndex:
    return cached_searcher(index, "impact index", lambda folder: _ImpactIndex(
        autoclass("io.anserini.search.SimpleImpactSearcher")(str(folder)),
        autoclass("io.anserini.index.IndexReaderUtils").getReader(str(folder))), impact=True)


def _document_frequency(reader, term: str) -> int:
    """Documents holding ``term`` in the impact field (terms are pretokenized: no analyzer)."""
    return int(reader.docFreq(autoclass("org.apache.lucene.index.Term")("contents", term)))


def retrieve_impact(index: PathLike, queries: dict[str, Vector], hits: int = 1000,
                    threads: int = 2) -> dict[str, list[Candidate]]:
    """Top ``hits`` per query by sum of query weight x document weight (Anserini's order: score, then docid)."""
    if hits < 1:
        raise InputError(f"--hits must be at least 1, not {hits}")
    opened = _open(index)
    searcher, reader = opened.searcher, opened.reader
    total = int(searcher.get_total_num_docs())
    hashmap, integer, array_list = autoclass("java.util.HashMap"), autoclass("java.lang.Integer"), autoclass("java.util.ArrayList")
    jqueries, jqids = array_list(), array_list()
    for qid, vector in queries.items():
        jq = hashmap()
        for term, w in vector.items():
            if 0 < _document_frequency(reader, term) < total:  # Pyserini keeps terms with idf > 0 only
                jq.put(term, integer(int(w)))
        jqueries.add(jq)
        jqids.add(str(qid))
    try:
        results = searcher.batch_search(jqueries, jqids, int(hits), int(threads))
    except Exception as exc:  # noqa: BLE001
        raise RuntimeError(f"Anserini impact search failed: {java_error(exc)}") from None
    return {qid: [Candidate(str(h.docid), _float32(h.score)) for h in (results.get(str(qid)) or ())] for qid in queries}


def num_impact_docs(index: PathLike) -> int:
    return int(_open(index).searcher.get_total_num_docs())
