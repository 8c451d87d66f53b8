"""Records passed between modules: small frozen dataclasses, named after the paper's notation."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Callable, Iterator


@dataclass(frozen=True)
class Candidate:
    """One first-stage candidate: docid and its first-stage score."""

    docid: str
    score: float


@dataclass(frozen=True, eq=False)
class Run(Mapping):
    """A TREC run: per query id (in file order), its candidates in trec_eval order (score descending,
    ties by docid descending). Read by ``io.readers.read_run``, written by ``io.writers.write_run``; a
    read-only mapping qid -> candidates."""

    queries: Mapping[str, tuple[Candidate, ...]]

    def __getitem__(self, qid: str) -> tuple[Candidate, ...]:
        return self.queries[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self.queries)

    def __len__(self) -> int:
        return len(self.queries)

    def scores(self) -> dict[str, dict[str, float]]:
        """qid -> docid -> score: what evaluation (ir_measures, pytrec_eval) takes."""
        return {q: {c.docid: c.score for c in cands} for q, cands in self.queries.items()}

    def restrict(self, qids: Iterable[str]) -> "Run":
        """The queries in ``qids`` only (file order kept)."""
        wanted = set(qids)
        return Run({q: c for q, c in self.queries.items() if q in wanted})


@dataclass(frozen=True)
class Doc:
    """A document's text: optional title and body (title is prepended in prompts)."""

    docid: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class RankingTask:
    """One query to rerank: qid, query text and candidates in first-stage order."""

    qid: str
    query: str
    candidates: tuple[Candidate, ...]

    @property
    def n(self) -> int:
        """Number of candidates n."""
        return len(self.candidates)


class Phase(str, enum.Enum):
    """What a step is, for stats, traces and progress (a str, so it serialises as its value).

    AcuRank: ``initial`` (disjoint windows of m), ``adaptive`` (groups of the uncertain set C),
    ``final`` (the last pass over {s_i > eps}), ``done`` (no windows: the final ratings). Sliding
    windows: ``pass``. TrueSkill-Static: ``stage``. TourRank: ``stage1`` .. ``stage5``.
    """

    initial = "initial"
    adaptive = "adaptive"
    final = "final"
    done = "done"
    pass_ = "pass"
    stage = "stage"
    stage1 = "stage1"
    stage2 = "stage2"
    stage3 = "stage3"
    stage4 = "stage4"
    stage5 = "stage5"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Step:
    """What a strategy asks for next: independent windows plus bookkeeping for stats/progress.

    ``phase`` is a :class:`Phase`; ``iteration`` is the method's own counter (AcuRank: adaptive groups
    reranked before this step, the paper's B counter; sliding windows: the pass; TourRank: the
    tournament; TrueSkill-Static: the stage), while the driver numbers every step the same way for all
    methods (``step`` in stats: 1, 2, ... in the order the steps were sent, one round each);
    ``uncertain`` is |C| for adaptive AcuRank iterations (None for other methods).
    """

    windows: tuple[tuple[str, ...], ...]
    phase: Phase
    iteration: int
    uncertain: int | None = None
    #: On AcuRank's last step ("done"): why it stopped (see :data:`STOP_REASONS`).
    stop: str | None = None
    #: Lazily builds the ratings state (t, per-doc mu, sigma, s, rank) for ``--trace``.
    snapshot: Callable[[], RatingsSnapshot] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DocRating:
    """One document's rating at a step: mu, sigma, s_i = P(x_i > t) (None before the first t), rank by mu."""

    docid: str
    mu: float
    sigma: float
    s: float | None
    rank: int


@dataclass(frozen=True)
class RatingsSnapshot:
    """Every document's rating at one step, best mu first, and the threshold t (traces and the API)."""

    t: float | None
    docs: tuple[DocRating, ...]


#: Why an adaptive method stopped: the tau rule (|C| < tau, after the final pass), nothing left
#: uncertain, a stable top-k, the adaptive-group budget B, the total call cap N (acurank-N), or the
#: round cap R (--max-rounds: its last round was a final pass).
STOP_REASONS = ("tau", "converged", "topk-stable", "budget", "call-cap", "round-cap")


@dataclass(frozen=True)
class RerankRequest:
    """A window as the reranker sees it: query, docids and (for text backends) their Docs, in presented order.

    Each backend formats the texts itself (an LLM prompt, an embedding input, ...).
    """

    qid: str
    query: str
    docids: tuple[str, ...]
    docs: tuple[Doc, ...] = ()

    def __post_init__(self) -> None:
        if self.docs and len(self.docs) != len(self.docids):
            raise ValueError(f"request for query {self.qid!r}: {len(self.docs)} docs for {len(self.docids)} docids")


@dataclass(frozen=True)
class RerankResult:
    """A reranker's answer: ``order`` is a permutation of window positions, best first."""

    order: tuple[int, ...]
    input_tokens: int = 0
    output_tokens: int = 0
    latency: float = 0.0
    parse: str = "ok"  # ok | repaired | unparseable
    cached: bool = False
    raw: str = ""
    backend: str = ""
    endpoint: str = ""  # which server answered (openai: with several --base-url); "" for local models


@dataclass(frozen=True)
class Ranked:
    """One ranked document: a strategy gives its own score (mu) or None (ordered without scores);
    the driver turns them into run scores that strictly decrease down a query."""

    docid: str
    score: float | None


@dataclass
class CallTally:
    """Honest accounting of reranker calls: calls, docs sent, cached calls, tokens, parse outcomes."""

    calls: int = 0
    docs_sent: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    rerank_seconds: float = 0.0
    parse_counts: dict = field(default_factory=dict)
    #: Sequential reranker batches waited for (the critical path: what latency is made of).
    rounds: int = 0
    #: Model calls per serving endpoint (only backends that name one; cached calls are not served).
    endpoints: dict = field(default_factory=dict)

    def record(self, docs: int, result: "RerankResult", seconds: float) -> None:
        """Count one call of ``docs`` documents."""
        served = {result.endpoint: 1} if result.endpoint and not result.cached else {}
        self.merge(CallTally(1, docs, int(result.cached), result.input_tokens, result.output_tokens,
                             seconds, {result.parse: 1}, 0, served))

    def merge(self, other: "CallTally") -> None:
        """Add another tally (a call, or a whole query)."""
        self.calls += other.calls
        self.docs_sent += other.docs_sent
        self.cached_calls += other.cached_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.rerank_seconds += other.rerank_seconds
        self.rounds += other.rounds
        for key, value in other.parse_counts.items():
            self.parse_counts[key] = self.parse_counts.get(key, 0) + value
        for key, value in other.endpoints.items():
            self.endpoints[key] = self.endpoints.get(key, 0) + value


@dataclass(frozen=True)
class QueryOutcome:
    """The result of reranking one query: final ranking plus the honest accounting."""

    qid: str
    method: str
    ranking: tuple[Ranked, ...]
    tally: CallTally
    iterations: tuple[dict, ...] = field(default_factory=tuple)
    seconds: float = 0.0
    stop: str | None = None  # why an adaptive method stopped (STOP_REASONS); None for fixed schedules
