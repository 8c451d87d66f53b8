"""Records passed between modules: small frozen dataclasses, named after the paper's notation."""

from __future__ import annotations

import functools

import enum
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Callable, Iterator


@dataclass(frozen=True)
class Candidate:
    """One first-stage candidate: docid and its first-stage score."""

    docid: str
    score: float


@dataclass(frozen=True, eq=False)
class Run(Mapping):
    """A TREC run: per query id (in file order), its candidates in trec_eval order (score descending,
    ties by docid descending). Read by ``io.runs.read_run``, written by ``io.writers.write_run``; a
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

    def __post_init__(self) -> None:  # the backstop: every reader checks its fields first (io.collection_files.passage_text)
        if not (isinstance(self.text, str) and isinstance(self.title, str)):
            bad = "text" if not isinstance(self.text, str) else "title"
            raise TypeError(f"{bad} of document {self.docid!r} is {type(getattr(self, bad)).__name__}, expected a string")

    @property
    def blank(self) -> bool:
        """Nothing for a model to read: its text and its title hold no visible character (:func:`visible`). The one
        rule for an empty document at every entrance: refused where the reranker reads texts (the CLI names it, its
        query and file, and --skip-missing holds it after the reranked ones; the API, the adapters, serve and MCP
        name documents[i]); a reranker that reads no texts (simulated) ranks it."""
        return not (visible(self.text) or visible(self.title))


def visible(text: str) -> bool:
    """Whether ``text`` holds a character a reader sees: not only whitespace, control or format characters (a NUL, a
    zero-width space), which a model reads as nothing (such a document or query was ranked where a blank one is
    refused). The one rule for an empty query or document text."""
    return any(ch.isprintable() and not ch.isspace() for ch in text)


@dataclass(frozen=True)
class RankingTask:
    """One query to rerank: qid, query text and candidates in first-stage order."""

    qid: str
    query: str
    candidates: tuple[Candidate, ...]
    #: a task instruction for this query's prompts (a served request's ``instruction``); None: the backend's own
    instruction: str | None = None
    #: a task of passages (``--passages`` split at least one document): each candidate's document's number of
    #: passages, in candidate order (1: a document ranked whole); empty: documents ranked whole. A passage of a
    #: document split into more passages than a window holds starts with the query's widest prior sigma
    #: (:func:`~acurank_cli.method.trueskill.task_priors`)
    passages: tuple[int, ...] = ()
    #: whether the candidates' scores are first-stage scores given with them; False: their places n .. 1 stand in
    #: (documents given without scores), which a prompt's ``{score}`` does not show as a retriever's
    scored: bool = True

    @property
    def n(self) -> int:
        """Number of candidates n."""
        return len(self.candidates)


class Label(str, enum.Enum):
    """A closed set of names that travel as plain strings (stats JSON, traces, tables): equal to, hashed
    as and printed as its value, so ``StopReason.tau == "tau"`` also as a dict key."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __hash__(self) -> int:
        return hash(self.value)


class Phase(Label):
    """What a step is, for stats, traces and progress (a str, so it serialises as its value).

    AcuRank: ``initial`` (disjoint windows of m), ``adaptive`` (groups of the uncertain set C),
    ``final`` (the last pass over {s_i > eps}), ``done`` (no windows: the final ratings). Sliding
    windows: ``pass``. TrueSkill-Static: ``stage``. TourRank: ``stage1`` .. ``stage5``. BlitzRank:
    ``round``. ``wait``: no windows; the query waits until every query of the run has answered the same
    round (acurank-auto learning from the whole run).
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
    round = "round"
    wait = "wait"


class StopReason(Label):
    """Why an adaptive method stopped: the tau rule (|C| < tau, after the final pass), nothing left
    uncertain, a stable top-k, the adaptive-group budget B, the total call cap N (acurank-N), or the round
    cap R (--max-rounds: its last round was a final pass), or the query-set budget (--budget-total: its
    next iteration was not granted). BlitzRank: its top k certified (all resolved),
    the round cap, or a window that would repeat the last one (the published code raises on both)."""

    tau = "tau"
    converged = "converged"
    topk_stable = "topk-stable"
    budget = "budget"
    call_cap = "call-cap"
    round_cap = "round-cap"
    set_budget = "set-budget"
    certified = "certified"
    repeated_window = "repeated-window"

    @property
    def capped(self) -> bool:
        """Stopped by a budget or cap rather than by the method's own rule."""
        return self in (StopReason.budget, StopReason.call_cap, StopReason.round_cap, StopReason.set_budget)


class ParseStatus(Label):
    """How a reranker's answer became a permutation: as given, repaired (missing ids appended, repeats
    dropped), unparseable (the window kept in its presented order), or incomplete (scored answers,
    ``--answer logits``: some identifiers had no score, e.g. beyond an endpoint's top_logprobs cap, and
    follow the scored ones in presented order)."""

    ok = "ok"
    repaired = "repaired"
    unparseable = "unparseable"
    incomplete = "incomplete"
    #: the answer never came: the model was still thinking when its token limit cut it off (its thought is never
    #: searched for a ranking; the window keeps its presented order)
    thought_cut = "thought-cut"
    #: the token limit ended the answer: the identifiers it holds are read (repaired as published), but a ranking
    #: read from cut text is never called whole (it may be a thought no tag marked: docs/thinking.md)
    truncated = "truncated"


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
    #: the rest by keyword only (a plug-in's ``Step(windows, phase, iteration)`` keeps its meaning as fields are added)
    _: KW_ONLY
    uncertain: int | None = None
    #: On AcuRank's last step ("done"): why it stopped.
    stop: StopReason | None = None
    #: Under a query-set budget: the step is optional and this is what it is worth (AcuRank: the expected
    #: number of true top-k documents missing from the current top k); the driver may answer it with None
    #: (not granted), and the plan then finishes. None: the step is not optional.
    value: float | None = field(default=None, compare=False)
    #: Lazily builds the ratings state (t, per-doc mu, sigma, s, rank) for ``--trace``.
    snapshot: Callable[[], RatingsSnapshot] | None = field(default=None, compare=False, repr=False)
    #: On acurank-auto's last step: the performance noise beta its answers chose (its learned model).
    beta: float | None = None
    #: Lazily, each window's share of prior rating uncertainty left (:func:`acurank_cli.method.thinking_gate.unsettled`):
    #: what gated thinking (``--thinking gated``) reads; None for methods without an uncertainty.
    unsettled: Callable[[], tuple[float, ...]] | None = field(default=None, compare=False, repr=False)
    #: Gated thinking's decision per window (True: sent thinking), set by the driver's gate; None: not gated.
    think: tuple[bool, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class DocRating:
    """One document's rating at a step: mu, sigma, s_i = P(x_i > t) (None before the first t), rank by mu,
    and on the final ratings p_topk = P(rank <= k) (exact; None at the other steps)."""

    docid: str
    mu: float
    sigma: float
    s: float | None
    rank: int
    p_topk: float | None = None


@dataclass(frozen=True)
class RatingsSnapshot:
    """Every document's rating at one step, best mu first, and the threshold t (traces and the API)."""

    t: float | None
    docs: tuple[DocRating, ...]
    #: the pivot's rating (mu, sigma) where a reference player joined every window (``--pivot``); None otherwise
    pivot: tuple[float, float] | None = None


#: the pivot's document id in a query's windows (``--pivot``): a reference player rated in the same game
PIVOT_PREFIX = "acurank-pivot:"


def pivot_id(qid: str) -> str:
    """The pivot's document id in query ``qid``'s windows (one per query: a run's texts are one mapping)."""
    return PIVOT_PREFIX + qid


@dataclass(frozen=True)
class RerankRequest:
    """A window as the reranker sees it: query, docids and (for text backends) their Docs, in presented order.

    Each backend formats the texts itself (an LLM prompt, an embedding input, ...).
    """

    qid: str
    query: str
    docids: tuple[str, ...]
    docs: tuple[Doc, ...] = ()
    #: gated thinking's decision for this window: True think, False answer directly; None: the backend's own
    #: setting (``--thinking``, or the model's default)
    think: bool | None = None
    #: the documents' first-stage scores, in presented order (text backends: a prompt template may show them)
    scores: tuple[float, ...] = ()
    #: the query's task instruction (a listwise LLM puts it in the prompt); None: the backend's own
    instruction: str | None = None

    def __post_init__(self) -> None:
        if self.docs and len(self.docs) != len(self.docids):
            raise ValueError(f"request for query {self.qid!r}: {len(self.docs)} docs for {len(self.docids)} docids")


@dataclass(frozen=True)
class RerankResult:
    """A reranker's answer: ``order`` is a permutation of window positions, best first. ``order`` may be given by
    position (a plug-in's ``RerankResult(tuple(order))``), the rest by keyword only."""

    order: tuple[int, ...]
    _: KW_ONLY
    input_tokens: int = 0
    output_tokens: int = 0
    latency: float = 0.0
    parse: ParseStatus = ParseStatus.ok
    cached: bool = False
    raw: str = ""
    backend: str = ""
    endpoint: str = ""  # which server answered (openai: with several --base-url); "" for local models
    #: per presented position, how strongly the reranker preferred it (higher is better: a first token's
    #: logit with --answer logits, the simulated reranker's noisy grade); None when the answer is an order only
    #: or a position had no score
    scores: tuple[float | None, ...] | None = None
    #: tokens the model spent thinking before it answered (the usage's ``reasoning_tokens``, or counted from the
    #: thought); ``output_tokens`` are the answer's alone
    reasoning_tokens: int = 0
    #: the call was made with thinking on
    thinking: bool = False
    #: the thought, kept apart from the answer (``raw``), never read for a ranking
    thought: str = ""
    #: per presented position, the backend's own score of the document alone, comparable across windows and queries
    #: (a pointwise backend's: minilm's cosine, ce:'s logit); None for a backend that scores no document alone. A
    #: calibration map fit with ``--absolute`` reads it (never the method)
    absolute: tuple[float, ...] | None = None

    @property
    def thought_cut(self) -> bool:
        """The model was still thinking when its token limit cut it off (no answer came: decided once, by the
        thought reader, as the parse status ``thought-cut``)."""
        return self.parse == ParseStatus.thought_cut


class Answer(tuple):
    """What a plan receives for one window: the permutation (positions, best first; a tuple) and, when the
    reranker scored the window (``--answer logits``, the simulated reranker), ``scores`` per presented position
    (higher is better; None otherwise). Strategies that need only the order use it as the tuple it is."""

    scores: tuple[float | None, ...] | None

    def __new__(cls, order, scores=None):
        self = super().__new__(cls, order)
        self.scores = None if scores is None else tuple(scores)
        return self


@dataclass(frozen=True)
class Ranked:
    """One ranked document: a strategy gives its own score (mu) or None (ordered without scores);
    the driver turns them into run scores that strictly decrease down a query."""

    docid: str
    score: float | None


@dataclass(kw_only=True)
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
    #: tokens spent thinking, and the calls made with thinking on
    reasoning_tokens: int = 0
    thinking_calls: int = 0

    @property
    def thought(self) -> bool:
        """Some call thought (made with thinking on, or tokens spent thinking): what stats, progress and serve show
        thinking figures for (a run that never thought shows none)."""
        return bool(self.thinking_calls or self.reasoning_tokens)

    @property
    def thoughts_cut(self) -> int:
        """Calls whose thought the token limit cut off (:attr:`RerankResult.thought_cut`)."""
        return self.parse_counts.get(ParseStatus.thought_cut, 0)

    def record(self, docs: int, result: "RerankResult", seconds: float) -> None:
        """Count one call of ``docs`` documents."""
        served = {result.endpoint: 1} if result.endpoint and not result.cached else {}
        self.merge(CallTally(calls=1, docs_sent=docs, cached_calls=int(result.cached),
                             input_tokens=result.input_tokens, output_tokens=result.output_tokens,
                             rerank_seconds=seconds, parse_counts={str(result.parse): 1}, rounds=0, endpoints=served,
                             reasoning_tokens=result.reasoning_tokens, thinking_calls=int(result.thinking)))

    def merge(self, other: "CallTally") -> None:
        """Add another tally (a call, or a whole query)."""
        self.calls += other.calls
        self.docs_sent += other.docs_sent
        self.cached_calls += other.cached_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.rerank_seconds += other.rerank_seconds
        self.rounds += other.rounds
        self.reasoning_tokens += other.reasoning_tokens
        self.thinking_calls += other.thinking_calls
        for key, value in other.parse_counts.items():
            self.parse_counts[key] = self.parse_counts.get(key, 0) + value
        for key, value in other.endpoints.items():
            self.endpoints[key] = self.endpoints.get(key, 0) + value


@dataclass(frozen=True, kw_only=True)
class IterationRecord:
    """One step a query's strategy sent (in stats): the driver's step number, the method's own iteration
    counter, the phase, |C| (AcuRank's adaptive steps), the number of windows and their sizes."""

    step: int
    iteration: int
    phase: Phase
    uncertain: int | None
    groups: int
    window_sizes: tuple[int, ...]
    #: gated thinking: the windows of this step sent thinking (None: not gated)
    thinking: int | None = None


@dataclass(frozen=True)
class PassageSpan:
    """Where one passage of a document lies (``--passages``): its number in the document (0-based), its words
    ``[start, end)`` (whitespace-separated words; each character of a script written without spaces counts as one)
    and the same span in characters ``[char_start, char_end)`` of the document's text."""

    index: int
    start: int
    end: int
    char_start: int
    char_end: int


@dataclass(frozen=True, kw_only=True)
class PassageSummary:
    """How a query's documents were ranked by their passages (``--passages``): the passages ranked (the players),
    the documents split, the documents with more passages than the cap (their first ones ranked) and, for each
    document split, the passage its score came from (MaxP: its best; FirstP: its first)."""

    ranked: int
    split: int
    capped: int
    best: Mapping[str, PassageSpan] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RelevanceSummary:
    """Where relevance ends for one query (``--calibration``, docs/relevance.md): the grade the map is for, each
    ranked document's P(grade >= grade) by docid, P(no relevant candidate) and, when a cut was asked, how many
    documents the run kept (0: nothing here), and the run's comparison with the map's fitting queries."""

    grade: int
    p_none: float
    p: Mapping[str, float] = field(default_factory=dict)
    kept: int | None = None
    #: the run's queries against the map's fitting queries (``relevance.shift.Shift.as_dict``), where the map recorded
    #: its queries' signals: the same in every record of a run (a run written to stdout has no meta file to hold it)
    shift: Mapping[str, Any] | None = None
    #: ``--prior em``: the share of relevant candidates the map was moved to, EM's over the run's queries, beside the
    #: map's own (``{"share", "fit_share", "queries", "steps"}``): the same in every record of a run, read back on resume
    prior: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class QueryOutcome:
    """The result of reranking one query: final ranking plus the honest accounting."""

    qid: str
    method: str
    ranking: tuple[Ranked, ...]
    tally: CallTally
    iterations: tuple[IterationRecord, ...] = field(default_factory=tuple)
    seconds: float = 0.0
    stop: StopReason | None = None  # why an adaptive method stopped; None for fixed schedules
    #: the performance noise beta a learning method ended with (acurank-auto); None for the others
    beta: float | None = None
    #: lazily, the final ratings (the method's last step's snapshot); None for methods without ratings
    final: Callable[[], "RatingsSnapshot"] | None = field(default=None, compare=False, repr=False)
    #: ranked by passages (``--passages``): what was split and each split document's scoring passage; None: by documents
    passages: PassageSummary | None = None
    #: each document's absolute score, by docid, where the backend gave one (:attr:`RerankResult.absolute`: the last
    #: answer's, the same in every answer of a pointwise backend); None where it gave none
    absolute: Mapping[str, float] | None = None

    def absolute_scores(self) -> Mapping[str, float] | None:
        """:attr:`absolute`, or an empty mapping for a query that made no call (one candidate: no window sent, so no
        score to give, which a map fit with them then reads as unknown); None: the backend gave none."""
        return self.absolute if self.absolute is not None or self.tally.calls else {}

    def final_ratings(self) -> dict[str, "DocRating"]:
        """Each document's final rating (mu, sigma, p_topk), by docid (the API's and the server's answers read it);
        empty for methods without ratings."""
        return self.rated()[0]

    def rated(self) -> tuple[dict[str, "DocRating"], tuple[float, float] | None]:
        """The final ratings by docid and the pivot's (mu, sigma) where one was rated (``--pivot``): the one place the
        final snapshot is taken."""
        if self.final is None:
            return {}, None
        snap = self.final()
        return {d.docid: d for d in snap.docs}, snap.pivot


@dataclass(frozen=True)
class RunAbout:
    """What every stats record of a run says about the run: its command digest, the reranker's identity and the
    method's parameters, and the model's parameter count when known (the FLOPs estimate's)."""

    fingerprint: str | None = None
    reranker: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None
    parameters: float | None = None


@dataclass(frozen=True, kw_only=True)
class StatsRecord:
    """One line of a run's per-query stats JSONL (the ``rerank`` -> ``eval``/``report`` contract): the
    call accounting of one query, its steps, why it stopped, its wall time, and what made the run (the
    fingerprint digest, reranker identity and parameters). Its JSON line is written and read back by
    :mod:`acurank_cli.io.line_records` (:func:`acurank_cli.io.run_files.read_stats` is the one reader)."""

    qid: str
    method: str
    calls: int
    docs_sent: int = 0
    cached_calls: int = 0
    #: tokens, rounds and seconds are None in a record that does not hold them (written by an older version)
    input_tokens: int | None = None
    output_tokens: int | None = None
    rerank_seconds: float = 0.0
    parse_counts: Mapping[str, int] = field(default_factory=dict)
    rounds: int | None = None
    #: model calls per serving endpoint (only backends that name one)
    endpoints: Mapping[str, int] = field(default_factory=dict)
    iterations: tuple[IterationRecord, ...] = ()
    stop: StopReason | None = None
    seconds: float | None = None
    fingerprint: str | None = None
    reranker: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None
    #: estimated FLOPs of the query's calls, 2 x model parameters x (input + output tokens); None when the
    #: parameter count is unknown (a remote model without --model-params, the simulated reranker)
    flops: float | None = None
    #: the performance noise beta acurank-auto learned (None for the other methods: not written)
    beta: float | None = None
    #: tokens spent thinking and calls made with thinking on (None: the run did not think; not written)
    reasoning_tokens: int | None = None
    thinking_calls: int | None = None
    #: ranked by passages (``--passages``; None: by documents, not written)
    passages: PassageSummary | None = None
    #: P(relevant) and the cut (``--calibration``; None: not asked, not written)
    relevance: RelevanceSummary | None = None
    #: what ``--calibrate`` fits on, kept for a resume: ``{"docids": [...], "x": [[...], ...]}`` in rank order (read
    #: back here; the job writes it beside the record's other fields); None: not fitting
    calibration_features: Mapping[str, Any] | None = None
    #: what the query's calls cost at ``--price-in``/``--price-out`` (:mod:`acurank_cli.run.money`); None: no prices
    money: float | None = None

    @classmethod
    def of(cls, outcome: QueryOutcome, about: RunAbout = RunAbout()) -> "StatsRecord":
        """The record of a finished query, with what ``about`` says of the run."""
        t = outcome.tally
        size = about.parameters
        flops = None if size is None else 2.0 * float(size) * (t.input_tokens + t.output_tokens + t.reasoning_tokens)
        thought = t.thought
        return cls(qid=outcome.qid, method=outcome.method, calls=t.calls, docs_sent=t.docs_sent,
                   cached_calls=t.cached_calls, input_tokens=t.input_tokens, output_tokens=t.output_tokens,
                   rerank_seconds=t.rerank_seconds, parse_counts=dict(t.parse_counts), rounds=t.rounds,
                   endpoints=dict(t.endpoints), iterations=tuple(outcome.iterations), stop=outcome.stop,
                   seconds=round(outcome.seconds, 4), fingerprint=about.fingerprint, reranker=about.reranker,
                   params=about.params, flops=flops, beta=outcome.beta,
                   reasoning_tokens=t.reasoning_tokens if thought else None,
                   thinking_calls=t.thinking_calls if thought else None, passages=outcome.passages)

    @property
    def window_sizes(self) -> tuple[int, ...]:
        """The size of every window sent to the model, in order (windows of one document are never sent)."""
        return tuple(n for it in self.iterations for n in it.window_sizes if n >= 2)

    @property
    def tokens(self) -> int | None:
        """Input, output and thinking tokens (None when the record holds none)."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0) + (self.reasoning_tokens or 0)


@dataclass(frozen=True, kw_only=True)
class TraceRecord:
    """One line of a ``--trace`` JSONL: a query's ratings at one step (every document's mu, sigma, s_i and
    rank by mu, and the threshold t)."""

    qid: str
    method: str
    iteration: int
    phase: Phase
    t: float | None
    docs: tuple[DocRating, ...]
    #: gated thinking: which of the step's windows were sent thinking (None: not gated)
    think: tuple[bool, ...] | None = None
    #: the pivot's rating (mu, sigma) where a reference player joined every window (``--pivot``); None otherwise
    pivot: tuple[float, float] | None = None
    #: the windows the step sends (docids, as presented; windows of one document are never sent): () on the last
    windows: tuple[tuple[str, ...], ...] = ()

    @functools.cached_property
    def by_docid(self) -> dict[str, DocRating]:
        """Every document's rating by docid."""
        return {d.docid: d for d in self.docs}

    @classmethod
    def of(cls, qid: str, method: str, step: Step) -> "TraceRecord":
        snap = step.snapshot()
        return cls(qid=qid, method=method, iteration=step.iteration, phase=step.phase, t=snap.t, docs=snap.docs,
                   think=step.think, pivot=snap.pivot, windows=tuple(tuple(w) for w in step.windows if len(w) >= 2))


# -- run-file scores ---------------------------------------------------------------------------------


#: A nudge's relative size: trec_eval (and pytrec_eval) hold scores as single-precision floats, so two scores
#: closer than about 1.2e-7 relative are a tie, broken by docid, whatever order the run lists them in. Eight
#: float32 steps keep the listed order.
NUDGE = 2.0 ** -20


def strictly_decreasing(scores: Iterable[float]) -> list[float]:
    """Nudge scores (already in output order) down where needed so they strictly decrease, by a step that
    single-precision evaluators still see (:data:`NUDGE` relative, at least 1e-30)."""
    out: list[float] = []
    for s in scores:
        if out and not s < out[-1] * (1 - NUDGE if out[-1] > 0 else 1 + NUDGE) - 1e-30:
            s = out[-1] - max(abs(out[-1]) * NUDGE, 1e-30)
        out.append(float(s))
    return out


def positional(docids: Iterable[str]) -> tuple[Ranked, ...]:
    """Positional scores n, n-1, ..., 1 for methods without a score of their own."""
    docids = list(docids)
    n = len(docids)
    return tuple(Ranked(d, float(n - i)) for i, d in enumerate(docids))


def final_ranking(ranked: Iterable[Ranked]) -> tuple[Ranked, ...]:
    """A strategy's ranking with run-file scores: its own (mu), nudged to decrease strictly, or
    positional (n, n-1, ..., 1) for a method that orders without scores (score None)."""
    ranked = list(ranked)
    if any(r.score is None for r in ranked):
        return positional(r.docid for r in ranked)
    return tuple(Ranked(r.docid, s) for r, s in zip(ranked, strictly_decreasing(r.score for r in ranked)))
