"""Long documents ranked by their passages (``--passages WORDS[:STRIDE]``; the API's and PyTerrier's ``passages=``;
``acurank serve --passages`` and a request's ``max_chunks_per_doc``).

A document longer than WORDS words is split into passages of WORDS words, each starting STRIDE words after the
one before (default STRIDE = WORDS / 2, Dai & Callan's 150/75 overlap), the last one ending at the document's end;
at most ``max_per_doc`` passages a document (the first ones; Cohere's ``max_chunks_per_doc`` default, 10). A word
is a whitespace-separated token, and each character of a script written without spaces (Chinese, Japanese, Thai,
Lao, Khmer, Myanmar) is one word, so such a text splits too. A passage keeps its document's title and first-stage
score.

The method ranks passages: each passage is a player with its own rating, so the uncertain set, the windows and
the budget count passages. A passage's prior is its document's first-stage score as mu; a passage of a document split
into more passages than a window holds starts with the query's widest prior sigma (``RankingTask.passages``,
:func:`~acurank_cli.method.trueskill.task_priors`), so a low-scored long document's passages are not also nearly
certain. A document that is not split is its own one passage, under its own id: when no
document is longer than WORDS words the task is the document task itself, and the run is byte-identical to one
without ``--passages``. A split document's passages are named ``DOCID#J`` (J from 0) in windows, traces and the
call cache.

Windows and passages of one document: the passages are put in the task's candidate order round by round, every
document's first passage (in first-stage order), then every split document's second, and so on. The initial pass
cuts that order into disjoint windows, so a window holds at most one passage of a document until the rounds run
short (a document with many more passages than the others); the cap bounds that too. Later windows are the
method's own (AcuRank: the uncertain passages by s_i), so two passages of one document share a window when both
are uncertain, which is when the order between them decides the document's score.

A document's score is aggregated from its passages' final scores (the run's: AcuRank's mu, a baseline's
positional score): ``maxp`` the best passage's (the default), ``firstp`` the first passage's (only the first
passage is made: FirstP is truncation to WORDS words), ``sum`` the sum (SumP: favours documents with more
passages), ``softmax`` log(sum(exp(score))) (a smooth maximum). The output is one line per document, in that
score's order; each split document's scoring passage (the best one, the first under FirstP) is recorded
(:class:`~acurank_cli.records.PassageSummary`: the stats' ``passages``, the API's ``RankedDoc.passage``, serve's
``passage``), and its mu, sigma and p_topk are the document's in the API and serve.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator

from ..errors import InputError
from ..params import ParameterError, at_least
from ..records import (Candidate, Doc, Label, PassageSpan, PassageSummary, QueryOutcome, Ranked,
                       RankingTask, RatingsSnapshot, final_ranking)


class Aggregate(Label):
    """How a document's score comes from its passages' (``--passage-score``)."""

    maxp = "maxp"
    firstp = "firstp"
    sum = "sum"
    softmax = "softmax"


#: Cohere's max_chunks_per_doc default: passages made per document at most
MAX_PER_DOC = 10
#: the passage size a server uses for a request's max_chunks_per_doc when it was started without --passages
DEFAULT_WORDS = 150

_NO_SPACES = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
#: a word: one character of a script written without spaces, or a run of other non-space characters
_WORD = re.compile(f"[{_NO_SPACES}]|[^\\s{_NO_SPACES}]+")


_STRIDE_DOMAIN = "WORDS:STRIDE with STRIDE at most WORDS (a longer stride would leave words out)"


@dataclass(frozen=True)
class Passages:
    """How long documents are split and scored (see the module doc)."""

    words: int
    stride: int
    aggregate: Aggregate = Aggregate.maxp
    max_per_doc: int = MAX_PER_DOC

    def __post_init__(self) -> None:
        given = f"{self.words}:{self.stride}"
        for value in (self.words, self.stride):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError("passages", given, "WORDS:STRIDE with both at least 1", "--passages")
        if self.stride > self.words:
            raise ParameterError("passages", given, _STRIDE_DOMAIN, "--passages")
        value = self.max_per_doc
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError("max_passages", value, at_least(1).describe(), "--max-passages")

    @classmethod
    def parse(cls, value: str, aggregate: str | Aggregate | None = None, max_per_doc: int | None = None) -> "Passages":
        """``WORDS[:STRIDE]`` (a flag's or keyword's text), with the aggregate and the cap (None: the defaults)."""
        text = str(value).strip()
        match = re.fullmatch(r"([0-9]+)(?::([0-9]+))?", text)
        if match is None or int(match.group(1)) < 1 or (match.group(2) is not None and int(match.group(2)) < 1):
            raise ParameterError("passages", value, "WORDS or WORDS:STRIDE, whole numbers of at least 1 (e.g. 150 "
                                 "or 150:75)", "--passages")
        words = int(match.group(1))
        stride = int(match.group(2)) if match.group(2) is not None else max(1, words // 2)
        if stride > words:  # said with the text as given (the record's own check would show WORDS:STRIDE)
            raise ParameterError("passages", value, _STRIDE_DOMAIN, "--passages")
        try:
            how = Aggregate(aggregate) if aggregate is not None else Aggregate.maxp
        except ValueError:
            raise ParameterError("passage_score", aggregate, "one of " + ", ".join(a.value for a in Aggregate),
                                 "--passage-score") from None
        return cls(words, stride, how, MAX_PER_DOC if max_per_doc is None else max_per_doc)

    @classmethod
    def of(cls, passages: "str | int | Passages | None", passage_score: str | None = None,
           max_passages: int | None = None) -> "Passages | None":
        """The CLI's flags and the API's keywords as one record (None: documents are ranked whole); the score and
        the cap without ``passages`` are refused (they would do nothing)."""
        if passages is None:
            for name, value, flag in (("passage_score", passage_score, "--passage-score"),
                                      ("max_passages", max_passages, "--max-passages")):
                if value is not None:
                    raise ParameterError(name, value, "given only with passages (--passages WORDS[:STRIDE])", flag)
            return None
        if isinstance(passages, Passages):
            return passages
        return cls.parse(str(passages), passage_score, max_passages)

    @property
    def limit(self) -> int:
        """Passages made per document at most (FirstP makes only the first)."""
        return 1 if self.aggregate is Aggregate.firstp else self.max_per_doc

    def described(self) -> dict:
        """What a run's fingerprint records."""
        return {"words": self.words, "stride": self.stride, "score": self.aggregate.value,
                "max_per_doc": self.max_per_doc}

    def spans(self, text: str) -> tuple[tuple[PassageSpan, ...], bool]:
        """The passages of ``text`` (empty when it has at most ``words`` words: it is not split) and whether the cap
        cut some off."""
        words = [m.span() for m in _WORD.finditer(text)]
        if len(words) <= self.words:
            return (), False
        starts = [*range(0, len(words) - self.words, self.stride), len(words) - self.words]  # the last ends the text
        out = tuple(PassageSpan(j, s, s + self.words, words[s][0], words[s + self.words - 1][1])
                    for j, s in enumerate(starts[: self.limit]))
        return out, len(starts) > self.limit


def passage_id(docid: str, index: int) -> str:
    """A split document's passage ``index`` as the method sees it."""
    return f"{docid}#{index}"


@dataclass(frozen=True)
class Split:
    """One query's documents as passages: the passage task (the task itself when nothing was split), the passages'
    texts, and each passage's document and span (None: the document whole)."""

    task: RankingTask
    docs: Mapping[str, Doc]
    owner: Mapping[str, tuple[str, PassageSpan | None]]
    aggregate: Aggregate
    capped: int = 0
    split: int = 0

    def gather(self, outcome: QueryOutcome) -> QueryOutcome:
        """The document outcome of the passage outcome: one entry per document, by its aggregated score."""
        scores: dict[str, list[float]] = {}
        best: dict[str, str] = {}  # docid -> its scoring passage (its best; FirstP: its only one)
        for r in outcome.ranking:  # best first
            docid, _ = self.owner[r.docid]
            scores.setdefault(docid, []).append(r.score)
            best.setdefault(docid, r.docid)
        merged = {d: _aggregate(self.aggregate, s) for d, s in scores.items()}
        place = {d: i for i, d in enumerate(scores)}  # ties: the best passage's place
        order = sorted(scores, key=lambda d: (-merged[d], place[d]))
        ranking = final_ranking(Ranked(d, merged[d]) for d in order)
        spans = {d: self.owner[p][1] for d, p in best.items() if self.owner[p][1] is not None}
        summary = PassageSummary(ranked=self.task.n, split=self.split, capped=self.capped,
                                 best={d: spans[d] for d in order if d in spans})
        final = None if outcome.final is None else _documents_snapshot(outcome.final, best, order)
        return replace(outcome, ranking=ranking, final=final, passages=summary)


def _aggregate(how: Aggregate, scores: list[float]) -> float:
    """A document's score from its passages' (best first)."""
    if how is Aggregate.sum:
        return math.fsum(scores)
    if how is Aggregate.softmax:
        top = scores[0]
        return top + math.log(math.fsum(math.exp(s - top) for s in scores))
    return scores[0]  # maxp; firstp (one passage)


def _documents_snapshot(final: Callable[[], RatingsSnapshot], best: Mapping[str, str], order: list[str]
                        ) -> Callable[[], RatingsSnapshot]:
    """Lazily, each document's final rating: its scoring passage's mu, sigma, s and p_topk, ranked as the documents
    are."""

    def build() -> RatingsSnapshot:
        snap = final()
        by_id = {d.docid: d for d in snap.docs}
        return RatingsSnapshot(snap.t, tuple(replace(by_id[best[d]], docid=d, rank=r)
                                             for r, d in enumerate(order, 1) if best[d] in by_id))

    return build


def split(task: RankingTask, texts: Mapping[str, Doc], spec: Passages) -> Split:
    """The query's documents as passages (see the module doc); a document without a text is left whole."""
    rounds: list[list[tuple[Candidate, PassageSpan | None]]] = [[]]
    docs: dict[str, Doc] = {}
    owner: dict[str, tuple[str, PassageSpan | None]] = {}
    count: dict[str, int] = {}
    capped = split_count = 0
    for c in task.candidates:
        doc = texts.get(c.docid)
        spans, cut = spec.spans(doc.text) if doc is not None else ((), False)
        capped += cut
        count[c.docid] = max(1, len(spans))  # each document's passages
        if not spans:
            rounds[0].append((c, None))
            owner[c.docid] = (c.docid, None)
            if doc is not None:
                docs[c.docid] = doc
            continue
        split_count += 1
        for span in spans:
            while len(rounds) <= span.index:
                rounds.append([])
            rounds[span.index].append((c, span))
    if not split_count:
        return Split(task, docs, owner, spec.aggregate)
    candidates = []
    for group in rounds:
        for c, span in group:
            if span is None:
                candidates.append(c)
                continue
            pid = passage_id(c.docid, span.index)
            if pid in owner:
                raise InputError(f"query {task.qid}: passage {span.index} of document {c.docid!r} would be named "
                                 f"{pid!r}, which is another document's id: rename that document, or rank without "
                                 "passages")
            doc = texts[c.docid]
            docs[pid] = Doc(pid, doc.text[span.char_start: span.char_end], doc.title)
            owner[pid] = (c.docid, span)
            candidates.append(Candidate(pid, c.score))
    sizes = tuple(count[owner[c.docid][0]] for c in candidates)
    return Split(replace(task, candidates=tuple(candidates), passages=sizes), docs, owner, spec.aggregate, capped,
                 split_count)


@dataclass
class Splitter:
    """A run's queries split as the driver asks for them (memory: the queries in flight), their outcomes gathered
    back to documents. ``texts_of``: each query's documents."""

    spec: Passages
    texts_of: Callable[[RankingTask], Mapping[str, Doc]]
    splits: dict[str, Split] = field(default_factory=dict)

    def tasks(self, tasks: Iterable[RankingTask]) -> Iterator[RankingTask]:
        from .driver import WAIT

        for task in tasks:
            if task is WAIT:  # none now (--max-cost's gate): passed on to the driver
                yield task
                continue
            s = self.splits[task.qid] = split(task, self.texts_of(task), self.spec)
            yield s.task

    def passages_of(self, task: RankingTask) -> Mapping[str, Doc]:
        return self.splits[task.qid].docs

    def gather(self, outcome: QueryOutcome) -> QueryOutcome:
        return self.splits.pop(outcome.qid).gather(outcome)


__all__ = ["Aggregate", "DEFAULT_WORDS", "MAX_PER_DOC", "Passages", "Split", "Splitter", "passage_id", "split"]
