"""A PyTerrier transformer that reranks with any acurank method and backend (``pip install 'acurank[pyterrier]'``,
plain ``pyterrier``: no Java is started, acurank needs none).

    import pyterrier as pt
    from acurank_cli.integrations.pyterrier import AcuRankReranker
    acurank = AcuRankReranker("minilm", method="acurank-9")            # the API's backend, method and keywords
    pt.Experiment([bm25, bm25 >> acurank], topics, qrels, ["nDCG@10", "AP(rel=2)"], baseline=0, correction="holm")

Input: a result frame with ``qid``, ``query``, ``docno`` and the passage text in ``text_field`` (default
``text``); without that column the texts come from ``corpus`` (a JSONL corpus file, as ``--corpus``) or
``dataset`` (``irds:<id>``, a local ir_datasets dataset). A ``score`` column is the first-stage score: each
query's candidates are taken in trec_eval's order (score descending, ties by docno descending) and their
ratings start from it, exactly as ``acurank rerank`` does with a run file; without it, the frame's order is the
first-stage order. The queries of a frame advance together through one run session (their windows share
batches, as ``--batch-queries`` does; ``batch_queries=None``: every query of the frame in one batch).

Output: one row per input row, sorted by query (first-appearance order) and the method's final order, with
``score`` (the run file's score: strictly decreasing within a query) and ``rank`` (0-based, PyTerrier's), plus
``p_topk``, ``mu`` and ``sigma`` for methods with ratings (NaN otherwise); the input's other columns are kept. With
``passages="WORDS[:STRIDE]"`` (long documents ranked by their passages, as ``--passages``), also ``passage``: the
text of the passage each document's score came from ("" for a document not split). With ``calibration=MAP.json``
(a calibration map, docs/relevance.md), also ``p_relevant``: P(grade >= the map's grade).
After a transform, :attr:`AcuRankReranker.accounting` holds each query's calls, cached calls, documents sent
and tokens (the honest accounting of every call).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import pandas as pd
import pyterrier as pt

from ..api import Reranker, adapted
from ..errors import InputError
from ..io.collection_files import passage_text
from ..io.sources import check_id
from ..method.registry import method_options
from ..records import Doc
from ..run.documents import BLANK, check_unicode, score_of

#: columns the transformer adds (and returns, empty, for an empty frame)
OUTPUT_COLUMNS = ("score", "rank", "p_topk", "mu", "sigma")


class AcuRankReranker(pt.Transformer):
    """Reranks a PyTerrier result frame with an acurank method (``method``, the ``--method`` names) and backend
    (``reranker``, the ``--reranker`` names, or a built :class:`~acurank_cli.api.Reranker`)."""

    def __init__(self, reranker: Any = "minilm", method: str = "acurank", *, text_field: str = "text",
                 corpus: str | None = None, dataset: str | None = None, batch_queries: int | None = None,
                 verbose: bool = False, **options: Any):
        if isinstance(reranker, Reranker):
            self.reranker = reranker
        else:
            if "init" not in options and "init" in method_options(method):
                options["init"] = "score"  # a result frame's scores are a run's: the CLI's default init
            self.reranker = Reranker(reranker, method, batch_queries=batch_queries, **options)
        adapted(self.reranker, "AcuRankReranker")  # a map fit with a pivot refused here: a frame carries none
        self.text_field, self.corpus, self.dataset, self.verbose = text_field, corpus, dataset, verbose
        self.batch_queries = batch_queries
        #: qid -> {"calls", "cached_calls", "docs_sent", "input_tokens", "output_tokens", "seconds"} of the last run
        self.accounting: dict[str, dict[str, float]] = {}

    def __repr__(self) -> str:
        return f"AcuRankReranker({self.reranker.backend!r}, method={self.reranker.method!r})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        need = ["qid", "query", "docno"]
        missing = [c for c in need if c not in inp.columns]
        if missing:
            raise InputError(f"the result frame lacks column {missing[0]!r} (AcuRankReranker needs qid, query, docno "
                             f"and the passage text in {self.text_field!r}; it has {', '.join(map(str, inp.columns))})")
        added = (*OUTPUT_COLUMNS, *(("passage",) if self.reranker.passages is not None else ()),
                 *(("p_relevant",) if self.reranker.calibration is not None else ()))
        out_columns = [*inp.columns, *(c for c in added if c not in inp.columns)]
        if len(inp) == 0:
            return pd.DataFrame({c: pd.Series(dtype=inp[c].dtype if c in inp.columns else float) for c in out_columns})
        _checked(inp)
        texts = self._texts(inp)
        frame = inp.reset_index(drop=True)
        order = list(dict.fromkeys(frame["qid"].astype(str)))
        rows_of = {q: rows for q, rows in frame.groupby(frame["qid"].astype(str), sort=False).groups.items()}
        queries, qids = [], []
        for qid in order:
            rows = frame.loc[rows_of[qid]]
            if rows["query"].nunique() != 1:
                raise InputError(f"query {qid} has {rows['query'].nunique()} different query texts in the frame")
            if "score" in rows.columns:  # trec_eval's order: score descending, ties by docno descending
                _numbers(rows, qid)
                rows = rows.assign(_docno=rows["docno"].astype(str)).sort_values(
                    ["score", "_docno"], ascending=False, kind="stable")
            scores = rows["score"].map(float) if "score" in rows.columns else None
            docs = [{"id": docno, **texts(qid, docno, value), **({} if scores is None else {"score": scores[i]})}
                    for i, docno, value in zip(rows.index, rows["docno"].astype(str), texts.column(rows))]
            queries.append((str(rows["query"].iloc[0]), docs))
            qids.append(qid)
        if self.verbose:
            print(f"acurank: {self.reranker.method} over {len(qids)} queries", flush=True)
        outputs = self.reranker.rerank_batch(queries, qids=qids)
        self.accounting = {o.qid: {"calls": o.tally.calls, "cached_calls": o.tally.cached_calls,
                                   "docs_sent": o.tally.docs_sent, "input_tokens": o.tally.input_tokens,
                                   "output_tokens": o.tally.output_tokens, "seconds": o.seconds} for o in outputs}
        result = []
        for out in outputs:
            rows = frame.loc[rows_of[out.qid]].assign(_docno=lambda f: f["docno"].astype(str)).set_index("_docno")
            for rank, d in enumerate(out.docs):
                row = rows.loc[d.id].to_dict()
                row.update(score=d.score, rank=rank, p_topk=_num(d.p_topk), mu=_num(d.mu), sigma=_num(d.sigma))
                if self.reranker.passages is not None:
                    row["passage"] = d.passage_text or ""
                if self.reranker.calibration is not None:
                    row["p_relevant"] = d.p_relevant
                result.append(row)
        return pd.DataFrame(result, columns=out_columns)

    def _texts(self, inp: pd.DataFrame) -> "_Texts":
        """Where each row's passage comes from: the frame's ``text_field``, else the corpus or dataset's."""
        if self.text_field in inp.columns:
            return _Texts(self.text_field, reads=self.reranker.reranker.needs_texts)
        if not self.reranker.reranker.needs_texts:
            return _Texts(None, {})
        wanted = set(inp["docno"].astype(str))
        if self.corpus is not None:
            from ..io.collection_files import read_corpus

            docs = read_corpus(self.corpus, wanted)
        elif self.dataset is not None:
            from ..retrieval.datasets import load_irds

            fetch = load_irds(self.dataset).get_docs
            docs = fetch(wanted) if fetch is not None else {}
        else:
            raise InputError(f"the result frame has no {self.text_field!r} column: pass text_field=, or corpus= "
                             "(a JSONL corpus file) or dataset= (irds:<id>) to look the texts up")
        lacking = sorted(wanted - set(docs))
        if lacking:
            raise InputError(f"no text for docno {lacking[0]} ({len(lacking)} missing) in "
                             f"{self.corpus or self.dataset}")
        return _Texts(None, docs, reads=True)


class _Texts:
    """A query's passages: the frame's text column (any column name: read by name, not as an attribute), checked
    as every reader checks a text (a NaN or None cell is one error naming the query, docno and column), or the
    docs looked up in a corpus or dataset (``docs``; empty: a backend that reads no text). An empty passage
    (:attr:`~acurank_cli.records.Doc.blank`), in the column or the corpus, where the reranker ``reads`` texts is
    refused naming its query and docno, the frame's words for the API's ``documents[i]``."""

    def __init__(self, field: str | None, docs: dict | None = None, reads: bool = False):
        self.field, self.docs, self.reads = field, docs, reads

    def column(self, rows: pd.DataFrame):
        return rows[self.field] if self.field is not None else [None] * len(rows)

    def __call__(self, qid: str, docno: str, value: Any) -> dict[str, str]:
        if self.field is None:
            doc = self.docs.get(docno)
            if doc is None:
                return {"text": ""}
            if self.reads and doc.blank:
                raise InputError(BLANK, f"query {qid}, docno {docno}")
            return {"text": doc.text, "title": doc.title}
        try:
            text = passage_text(value, f"column {self.field!r}")
        except TypeError as exc:
            raise InputError(f"query {qid}, docno {docno}: {exc}") from None
        if self.reads and Doc(docno, text).blank:
            raise InputError(BLANK, f"query {qid}, docno {docno}")
        return {"text": text}


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)



def _numbers(rows: Any, qid: str) -> None:
    """A frame's ``score`` column holds numbers (the first-stage scores), by the API's rule
    (:func:`~acurank_cli.run.documents.score_of`: a text, a boolean, an integer no float holds are refused, naming
    their row; ``"3.5"`` and ``True`` were taken)."""
    for docno, value in zip(rows["docno"].astype(str), rows["score"]):
        try:
            score_of(value)
        except TypeError:
            raise InputError(f"query {qid}, docno {docno}: column 'score' {value!r} is not a number") from None
        except OverflowError:
            raise InputError(f"query {qid}, docno {docno}: column 'score' is beyond the range of a 64-bit float"
                             ) from None


def _checked(frame: Any) -> None:
    """Every text cell of the frame is valid Unicode (a lone surrogate in a qid, a docno or a column of its own was a
    UnicodeEncodeError, as the frame was grouped or the output made), and every docno a string or an integer (a
    float was taken by its text, ``1.0``) of an id's characters, by the API's rules (:func:`~acurank_cli.run.documents.check_unicode`),
    each refusal naming its row."""
    for column in frame.columns:
        if frame[column].dtype == object:
            for row, value in enumerate(frame[column]):
                if isinstance(value, str):
                    check_unicode(value, f"row {row}: column {column!r}")
    for column in ("docno", "qid"):  # ids: a float, a boolean or a missing one (None, NaN) was taken by its text
        for row, value in enumerate(frame[column]):
            if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
                raise InputError(f"row {row}: {column} {value!r} must be a string or an integer")
            check_id(str(value), f"row {row}: {column}", "")  # the API's rule, said of the row (not a list's place)
    for row, query in enumerate(frame["query"]):
        if not isinstance(query, str):  # the API's rule: a number was ranked as its text, a None as no query
            raise InputError(f"row {row}: query {query!r} must be a string")
    seen: dict[tuple[str, str], int] = {}
    for row, key in enumerate(zip(frame["qid"].astype(str), frame["docno"].astype(str))):
        if seen.setdefault(key, row) != row:  # named by the frame's rows (it named places in the sorted list)
            raise InputError(f"rows {seen[key]} and {row}: query {key[0]} gives docno {key[1]} twice: docnos must be "
                             "unique within a query")

__all__ = ["AcuRankReranker", "OUTPUT_COLUMNS"]
