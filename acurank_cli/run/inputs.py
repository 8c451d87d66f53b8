"""Assemble rerank inputs: candidates (run or candidate file), topics, doc texts and qrels."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..io.plan import FilePlan
from ..io.readers import Bundle, one_stdin, qids_file, read_candidates, read_corpus, read_qids, source_name
from ..retrieval.resolve import as_file, load_qrels, load_topics
from ..records import Doc, RankingTask
from .shard import Shard

#: The sample_runs layout: files beside a run that are used when not given explicitly.
BESIDE_TOPICS = "topics.tsv"
BESIDE_CORPUS = "passages.jsonl.gz"


@dataclass
class Inputs:
    """Everything ``rerank`` needs, plus what was skipped and notes for stderr."""

    tasks: list[RankingTask]
    docs: dict[str, Doc]
    qrels: dict[str, dict[str, int]]
    fmt: str
    notes: list[str] = field(default_factory=list)
    skipped_docs: int = 0
    skipped_queries: int = 0
    #: of the skipped docs, those in the output (below the reranked ones of their query, which was kept)
    held_docs: int = 0
    #: every query of the input before ``--shard`` (after ``--qids``), in its order
    every_query: tuple[str, ...] = ()
    #: per query, the candidates not reranked, written under the reranked head in first-stage order: those
    #: without text (``--skip-missing``), then those below ``--depth`` (``--drop-tail``: neither)
    tails: dict[str, tuple] = field(default_factory=dict)


@dataclass(frozen=True)
class InputSpec:
    """What a job reads: the run or candidate file ('-': stdin) at ``depth``, and where topics, texts
    (a corpus file, a Lucene index or ir_datasets) and qrels come from, as the flags name them."""

    run: str
    depth: int = 100
    topics: str | None = None
    corpus: str | None = None
    index: str | None = None
    dataset: str | None = None
    qrels: str | None = None
    qids: str | None = None
    skip_missing: bool = False
    shard: Shard | None = None  # --shard I/N: only the queries of that shard
    keep_tail: bool = True  # the candidates below --depth follow the reranked head (--drop-tail: not)

    def read_by(self, plan: FilePlan) -> FilePlan:
        """Name every file this spec reads in ``plan``: the run, topics, corpus, qrels, a --qids file, the index
        folder and the sample_runs files beside the run that are used when not given."""
        plan.read("RUN", self.run).read("--corpus", self.corpus).read("--index", self.index)
        plan.read("--qids", qids_file(self.qids))
        for flag, spec in (("--topics", self.topics), ("--qrels", self.qrels)):
            plan.read(flag, None if spec is None else as_file(spec))
        for name, what in ((BESIDE_TOPICS, "topics"), (BESIDE_CORPUS, "passages")):
            plan.read(f"(the {what} beside RUN)", _beside(self.run, name))
        return plan

    def load(self, need_texts: bool) -> "Inputs":
        """Read and complete everything (see :func:`load_inputs`)."""
        one_stdin([("RUN", self.run), ("--topics", self.topics), ("--corpus", self.corpus), ("--qrels", self.qrels),
                   ("--qids", self.qids)])
        return load_inputs(self.run, self.depth, self.topics, self.corpus, self.qrels, need_texts=need_texts,
                           skip_missing=self.skip_missing, doc_fetcher=_index_fetcher(self.index),
                           dataset=self.dataset, qids=self.qids, shard=self.shard, keep_tail=self.keep_tail)


def _index_fetcher(index: str | None) -> Callable[[set[str]], dict[str, Doc]] | None:
    """Doc texts from a Lucene index's stored raw documents (``--index``)."""
    if index is None:
        return None

    def fetch(wanted: set[str]) -> dict[str, Doc]:
        from ..retrieval.lucene import fetch_docs

        return fetch_docs(index, wanted)

    return fetch


def _beside(run: str, name: str) -> Path | None:
    if run == "-":
        return None
    candidate = Path(run).parent / name
    return candidate if candidate.exists() else None


def load_inputs(
    run: str,
    depth: int | None,
    topics: str | None = None,
    corpus: str | None = None,
    qrels: str | None = None,
    need_texts: bool = True,
    skip_missing: bool = False,
    doc_fetcher: Callable[[set[str]], dict[str, Doc]] | None = None,
    dataset: str | None = None,
    qids: str | None = None,
    shard: "Shard | None" = None,
    keep_tail: bool = True,
) -> Inputs:
    """Read the run/candidate file and complete it with topics, texts and qrels (see README).

    ``dataset`` (``irds:<id>``) supplies topics, qrels and doc texts through ir_datasets; explicit
    ``topics``/``corpus``/``qrels`` files still take precedence.
    """
    bundle, fmt = read_candidates(run, None if keep_tail else depth)
    tails = {}
    if keep_tail and depth is not None:
        tails = {q: c[depth:] for q, c in bundle.runs.items() if len(c) > depth}
        bundle.runs = {q: c[:depth] for q, c in bundle.runs.items()}
    notes: list[str] = []
    if qids is not None:
        wanted = read_qids(qids)
        missing = sorted(wanted - set(bundle.runs))
        if missing:
            raise InputError(f"--qids names {len(missing)} queries the run does not have (e.g. {missing[0]})",
                             source_name(run))
        bundle.runs = {q: c for q, c in bundle.runs.items() if q in wanted}
    every = tuple(bundle.runs)  # the queries before --shard, in the input's order (a merge restores it)
    if shard is not None:
        bundle.runs = {q: c for q, c in bundle.runs.items() if shard.holds(q)}
    if dataset:
        from ..retrieval.datasets import load_irds

        irds = load_irds(dataset)
        bundle.topics.update({q: t for q, t in irds.topics.items() if q not in bundle.topics})
        bundle.qrels = bundle.qrels or irds.qrels
        if doc_fetcher is None and corpus is None and irds.get_docs is not None:
            doc_fetcher = lambda wanted: irds.get_docs(wanted)  # noqa: E731
        notes.append(f"using topics, qrels and texts of {dataset}")
    if fmt == "trec" and not dataset:
        topics = topics or _note(_beside(run, BESIDE_TOPICS), "topics", notes)
        if corpus is None and doc_fetcher is None and need_texts:
            corpus = _note(_beside(run, BESIDE_CORPUS), "passages", notes)
    if topics:
        bundle.topics.update(load_topics(topics))
    wanted = {c.docid for cands in bundle.runs.values() for c in cands}
    if corpus and need_texts:
        bundle.docs.update(read_corpus(corpus, wanted))
    elif doc_fetcher is not None and need_texts:
        bundle.docs.update(doc_fetcher(wanted - set(bundle.docs)))
    if qrels:
        bundle.qrels = load_qrels(qrels)
    inputs = _complete(bundle, fmt, run, notes, need_texts, skip_missing, topics, tails if keep_tail else None)
    inputs.every_query = every
    return inputs


def _note(path: Path | None, what: str, notes: list[str]) -> str | None:
    if path is not None:
        notes.append(f"using {what} from {path}")
        return str(path)
    return None


def _complete(bundle: Bundle, fmt: str, run: str, notes: list[str], need_texts: bool, skip: bool,
              topics: str | None = None, tails: dict[str, tuple] | None = None) -> Inputs:
    """The tasks, with what was skipped; ``tails`` (None: --drop-tail) the candidates below --depth, written with a
    query's candidates that have no text (--skip-missing) under its reranked ones."""
    tasks: list[RankingTask] = []
    kept: dict[str, tuple] = {}  # per query, the candidates not reranked that its output keeps
    held_docs = 0
    skipped_docs = skipped_queries = 0
    name = source_name(run)
    for qid, cands in bundle.runs.items():
        if not cands:
            notes.append(f"warning: query {qid} has no candidates: it is left out of the output")
            skipped_queries += 1
            continue
        query = bundle.topics.get(qid)
        if query is None and need_texts:
            if not skip:
                advice = (f"{topics} has no line for it; pass the topics of this run's dataset" if topics
                          else "pass --topics FILE")
                raise InputError(f"no topic text for query {qid} ({advice}, or --skip-missing)", name)
            skipped_queries += 1
            continue
        if need_texts:
            missing = [c for c in cands if c.docid not in bundle.docs]
            if missing and not skip:
                raise InputError(
                    f"no text for doc {missing[0].docid} of query {qid} ({len(missing)} missing in this "
                    "query; pass --corpus FILE or --index DIR, or --skip-missing)",
                    name,
                )
            skipped_docs += len(missing)
            cands = tuple(c for c in cands if c.docid in bundle.docs)
            if not cands:  # every candidate lacked its text: nothing to rerank
                skipped_queries += 1
                continue
            if missing and tails is not None:  # not reranked, not lost: they follow the reranked ones
                kept[qid] = tuple(missing)
                held_docs += len(missing)
        if tails is not None and tails.get(qid):
            kept[qid] = kept.get(qid, ()) + tails[qid]
        tasks.append(RankingTask(qid, query or "", cands))
    return Inputs(tasks, bundle.docs, bundle.qrels, fmt, notes, skipped_docs, skipped_queries, held_docs, tails=kept)
