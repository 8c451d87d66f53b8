"""Assemble rerank inputs: candidates (run or candidate file), topics, doc texts and qrels."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..io.plan import FilePlan
from ..io.candidates import Bundle, candidate_blocks
from ..io.collection_files import qids_file, read_corpus, read_qids
from ..io.runs import RunBlock, in_trec_order
from ..io.sources import one_stdin, source_name
from ..retrieval.resolve import as_file, load_qrels, load_topics
from ..records import Candidate, Doc
from ..io.shards import Shard
from .spool import Spool, Tasks

#: candidates as two columns, (docids, scores)
Columns = tuple[tuple[str, ...], tuple[float, ...]]

#: The sample_runs layout: files beside a run that are used when not given explicitly.
BESIDE_TOPICS = "topics.tsv"
BESIDE_CORPUS = "passages.jsonl.gz"


@dataclass
class Inputs:
    """Everything ``rerank`` needs, plus what was skipped and notes for stderr."""

    tasks: Tasks  # in input order, read back from disk one query at a time
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
    #: per query, the lines its output holds: the reranked candidates and those written under them (``tail``)
    expected: dict[str, int] = field(default_factory=dict)
    #: whether any query keeps candidates it does not rerank
    any_tail: bool = False
    #: the run's name in messages: its path, or ``<stdin>``
    source: str = ""

    def tail(self, qid: str) -> tuple[Candidate, ...]:
        """The candidates of ``qid`` not reranked, written under its reranked head in first-stage order: those
        without text (``--skip-missing``), then those below ``--depth`` (``--drop-tail``: neither)."""
        return self.tasks.tail(qid)


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
    #: how the command names ``qids`` (``prompt render``'s is --qid)
    qids_flag: str = "--qids"

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

    @contextmanager
    def placing(self):
        """A refusal about one candidate of the run (``InputError.about``: an empty text, a first-stage score the
        rating init cannot start from) raised inside, given the run file's line (:func:`~acurank_cli.io.runs.placed`):
        the file alone was named."""
        try:
            yield
        except InputError as exc:
            from ..io.runs import placed

            placed(exc, self.run)  # the same error, its line filled in
            raise

    def load(self, need_texts: bool) -> "Inputs":
        """Read the run/candidate file and complete it with topics, texts and qrels (docs/rerank.md).

        A TREC run is read once, query by query (:func:`~acurank_cli.io.candidates.candidate_blocks`), and the
        queries to rerank (after ``--qids`` and ``--shard``: the others are checked and dropped as they are read) go
        to a :class:`~.spool.Spool` on disk, so memory does not grow with the run. ``dataset`` (``irds:<id>``)
        supplies topics, qrels and doc texts through ir_datasets; explicit ``topics``/``corpus``/``qrels`` files
        still take precedence. ``need_texts``: the reranker reads the texts (else topics and passages are not
        looked for).
        """
        one_stdin([("RUN", self.run), ("--topics", self.topics), ("--corpus", self.corpus), ("--qrels", self.qrels),
                   ("--qids", self.qids)])
        read = self._read()
        sources = self._sources(read, need_texts)
        if sources.topics:
            read.bundle.topics.update(load_topics(sources.topics))
        split = read.split(self.depth)
        order = read.spool.keys()
        if need_texts and (sources.corpus or sources.fetch is not None):  # every head's texts: docs/scale.md
            docids = {d for qid in order for d in split(qid)[0][0]}
            if sources.corpus:
                read.bundle.docs.update(read_corpus(sources.corpus, docids))
            else:
                read.bundle.docs.update(sources.fetch(docids - set(read.bundle.docs)))
        if self.qrels:
            read.bundle.qrels = load_qrels(self.qrels)
        heads, tails = Spool(), Spool()
        inputs = Inputs(Tasks(heads, tails, []), read.bundle.docs, read.bundle.qrels, read.fmt, read.notes,
                        every_query=tuple(read.every), source=read.name)
        texts_from = (sources.corpus or (self.index and f"the index {self.index}")
                       or (self.dataset and f"the dataset {self.dataset}") or (read.fmt != "trec" and read.name) or None)
        complete = _Completion(inputs, read.bundle.topics, read.name, need_texts=need_texts, skip=self.skip_missing,
                               topics=sources.topics, keep_tail=self.keep_tail, texts_from=texts_from)
        kept = [qid for qid in order if complete.put(heads, tails, qid, *split(qid))]
        read.spool.close()  # the queries as read: each is now a task (heads, tails) or was skipped
        inputs.tasks = Tasks(heads, tails, kept)
        if not kept and inputs.skipped_queries:
            raise InputError(f"no query left to rerank: --skip-missing skipped all {inputs.skipped_queries} "
                             f"({inputs.skipped_docs} docs without text)", read.name)
        return inputs

    def _read(self) -> "_Read":
        """The run or candidate file read once, the queries kept (--qids, --shard) spooled to disk."""
        read = _Read(source_name(self.run))
        wanted = read_qids(self.qids) if self.qids is not None else None
        seen: set[str] = set()
        later: dict[str, list[RunBlock]] = {}  # the blocks of a query after its first (a run not grouped by query)

        def keep(qid: str) -> bool:
            return (wanted is None or qid in wanted) and (self.shard is None or self.shard.holds(qid))

        with candidate_blocks(self.run, keep) as (read.fmt, read.bundle, blocks):
            for block in blocks:
                if block.again:
                    later.setdefault(block.qid, []).append(block)
                    continue
                seen.add(block.qid)
                if wanted is None or block.qid in wanted:
                    read.every.append(block.qid)
                if keep(block.qid):
                    read.spool.put(block.qid, (block.docids, block.scores))
        if not seen:
            raise InputError("run file is empty", read.name)
        if later:
            _join(read.spool, later, read.name, read.notes)
        missing = sorted(wanted - seen) if wanted is not None else []
        if missing:
            listed = ("; a qid holds ',': an @FILE gives one qid a line, the flag a comma-separated list"
                      if any("," in q for q in missing) else "")
            raise InputError(f"{self.qids_flag} names {len(missing)} quer{'y' if len(missing) == 1 else 'ies'} the run "
                             f"does not have (e.g. {missing[0]}){listed}", read.name)
        return read

    def _sources(self, read: "_Read", need_texts: bool) -> "_Sources":
        """Where topics and texts come from: the flags, then ir_datasets (--dataset), then the sample_runs files
        beside a TREC run; the dataset's topics and qrels go into the bundle."""
        sources = _Sources(self.topics, self.corpus, _index_fetcher(self.index))
        if self.dataset:
            from ..retrieval.datasets import load_irds

            irds = load_irds(self.dataset)
            bundle = read.bundle
            bundle.topics.update({q: t for q, t in irds.topics.items() if q not in bundle.topics})
            bundle.qrels = bundle.qrels or irds.qrels
            if sources.fetch is None and sources.corpus is None and irds.get_docs is not None:
                sources.fetch = irds.get_docs
            read.notes.append(f"using topics, qrels and texts of {self.dataset}")
        elif read.fmt == "trec":
            sources.topics = sources.topics or _note(_beside(self.run, BESIDE_TOPICS), "topics", read.notes)
            if sources.corpus is None and sources.fetch is None and need_texts:
                sources.corpus = _note(_beside(self.run, BESIDE_CORPUS), "passages", read.notes)
        return sources


@dataclass
class _Read:
    """A run or candidate file as read: its format and bundle (a candidate file's topics, texts, qrels), the
    queries kept, spooled, and every query before --shard (after --qids) in its order (what a merge restores)."""

    name: str
    fmt: str = "trec"
    bundle: Bundle = field(default_factory=Bundle)
    spool: Spool = field(default_factory=Spool)
    every: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def split(self, depth: int | None) -> Callable[[str], tuple[Columns, Columns]]:
        """qid -> its reranked head (--depth) and what lies below it, in first-stage order (a run's: by score)."""

        def split(qid: str) -> tuple[Columns, Columns]:
            docids, scores = in_trec_order(*self.spool.get(qid)) if self.fmt == "trec" else self.spool.get(qid)
            cut = len(docids) if depth is None else depth
            return (docids[:cut], scores[:cut]), (docids[cut:], scores[cut:])

        return split


@dataclass
class _Sources:
    """Where the topics and the texts come from: a topics file, a corpus file, or a fetcher (an index, a dataset)."""

    topics: str | None
    corpus: str | None
    fetch: Callable[[set[str]], dict[str, Doc]] | None


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


def _join(spool: Spool, later: dict[str, list[RunBlock]], name: str, notes: list[str]) -> None:
    """The later blocks of the queries of a run not grouped by query, joined to their first (a docid in two
    blocks of a query is refused as one repeated in a block is). Until here they were held in memory: said."""
    first = min((b for blocks in later.values() for b in blocks), key=lambda b: b.line)
    notes.append(f"warning: {name} is not grouped by query (query {first.qid} again at line {first.line}): the lines after "
                 "a query's first block are held in memory until the end of the file, so memory grows with them "
                 "(sort -s -k1,1 groups a run)")
    for qid, blocks in later.items():
        if qid not in spool:
            continue
        docids, scores = (list(column) for column in spool.get(qid))
        seen = set(docids)
        for block in blocks:
            for docid, score in zip(block.docids, block.scores):
                if docid in seen:
                    raise InputError(f"docid {docid} repeated in query {qid}", name, block.line)
                seen.add(docid)
                docids.append(docid)
                scores.append(score)
        spool.put(qid, (tuple(docids), tuple(scores)))


def _note(path: Path | None, what: str, notes: list[str]) -> str | None:
    if path is not None:
        notes.append(f"using {what} from {path}")
        return str(path)
    return None


@dataclass
class _Completion:
    """Turns each read query into its task (written back to the spool) or skips it, counting in ``inputs`` what
    was skipped and held: a query with no candidates, no topic text (with --skip-missing), or no text for any
    candidate is skipped; candidates without text (--skip-missing) and those below --depth follow the reranked
    ones (not with --drop-tail)."""

    inputs: Inputs
    texts: dict[str, str]  # qid -> query text
    name: str
    need_texts: bool
    skip: bool
    topics: str | None
    keep_tail: bool
    #: where the texts were looked up (a corpus file, an index, a dataset, a candidate file), or None: nowhere
    texts_from: str | None = None

    def put(self, heads: Spool, tails: Spool, qid: str, cands: Columns, below: Columns) -> bool:
        """Whether ``qid`` is reranked (its task then in ``heads``, what it keeps unreranked in ``tails``)."""
        inputs, docs = self.inputs, self.inputs.docs
        docids, scores = cands
        if not docids:
            inputs.notes.append(f"warning: query {qid} has no candidates: it is left out of the output")
            inputs.skipped_queries += 1
            return False
        query = self.texts.get(qid)
        if query is None and self.need_texts:
            if not self.skip:
                advice = (f"{self.topics} has no line for it; pass the topics of this run's dataset" if self.topics
                          else "pass --topics FILE")
                raise InputError(f"no topic text for query {qid} ({advice}, or --skip-missing)", self.name)
            inputs.skipped_queries += 1
            return False
        kept: Columns = ((), ())
        if self.need_texts:
            missing = [i for i, d in enumerate(docids) if d not in docs or docs[d].blank]
            if missing and not self.skip:
                first = docids[missing[0]]
                if first in docs:  # an empty document: the corpus has it, with nothing in it
                    refused = InputError(f"doc {first} of query {qid} has no text: its text and title are empty in "
                                         f"{self.texts_from or 'the input'} ({len(missing)} without text in this "
                                         "query; a model cannot judge it: give it a text, or --skip-missing to keep "
                                         "it after the reranked ones)", self.name)
                else:
                    advice = (f"{self.texts_from} has no text for it: give the corpus of this run's collection"
                              if self.texts_from else "pass --corpus FILE or --index DIR")
                    refused = InputError(f"no text for doc {first} of query {qid} ({len(missing)} missing in "
                                         f"this query; {advice}, or --skip-missing)", self.name)
                refused.about = (qid, first)  # its line found by the caller that knows the file (InputSpec.placing)
                raise refused
            inputs.skipped_docs += len(missing)
            if len(missing) == len(docids):  # every candidate lacked its text: nothing to rerank
                inputs.skipped_queries += 1
                return False
            if missing:
                gone = set(missing)
                if self.keep_tail:  # not reranked, not lost: they follow the reranked ones
                    kept = (tuple(docids[i] for i in missing), tuple(scores[i] for i in missing))
                    inputs.held_docs += len(missing)
                docids = tuple(d for i, d in enumerate(docids) if i not in gone)
                scores = tuple(s for i, s in enumerate(scores) if i not in gone)
        if self.keep_tail:
            kept = (kept[0] + below[0], kept[1] + below[1])
        heads.put(qid, (query or "", docids, scores))
        if kept[0]:
            tails.put(qid, kept)
        inputs.expected[qid] = len(docids) + len(kept[0])
        inputs.any_tail = inputs.any_tail or bool(kept[0])
        return True
