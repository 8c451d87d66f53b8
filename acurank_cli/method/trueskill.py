"""TrueSkill ratings N(mu, sigma^2) per candidate: how they start (init) and how a reranked window
updates them (the updaters: the trueskill package's ``rate``, or its bit-identical compiled port)."""

from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

import numpy as np
import trueskill

from ..errors import InputError
from ..records import RankingTask
from .acurank_params import Init, Outcome, Updater, sigma_rule
from .trueskill_fast import fast_update, fast_update_rows

#: The trueskill package's default environment (mu0 25, sigma0 25/3, beta 25/6, tau 25/300, draw 0.10).
ENV = trueskill.TrueSkill()

#: Scores ``--init score`` accepts: the TrueSkill update stays finite for mu and sigma = mu/3 in this range.
SCORE_RANGE = (1e-100, 1e100)


def score_problem(score: float, init: Init, way: str = "use --init zscore") -> str | None:
    """Why ``score`` cannot start a rating under ``init`` (None when it can), with ``way`` out (the entrance's words:
    :attr:`~acurank_cli.relevance.Spelling.zscore`)."""
    if not math.isfinite(score):
        return "is not a finite number"
    if Init(init) is Init.score and not SCORE_RANGE[0] <= score <= SCORE_RANGE[1]:
        if score <= 0:
            return f"is not positive (mu = score, sigma = mu/3 needs a positive score); {way}"
        return f"is outside {SCORE_RANGE[0]:g}..{SCORE_RANGE[1]:g}, where the TrueSkill update stays finite; {way}"
    return None


def check_scores(tasks: Sequence[RankingTask], init, source: str, way: str = "use --init zscore",
                 who: Callable[[str, str], str] = lambda qid, docid: f"query {qid} doc {docid}") -> None:
    """Every first-stage score of every query must start a rating under ``init``: checked before any call
    (``way``: the way out, in the entrance's words; ``who``: how it names a query's document, a run's by both ids)."""
    if init is None:
        return
    for task in tasks:
        for c in task.candidates:
            problem = score_problem(c.score, init, way)
            if problem:
                refused = InputError(f"{who(task.qid, c.docid)}: first-stage score {c.score:g} {problem}", source)
                refused.about = (task.qid, c.docid)  # the line: the reader's who knows the file (io.runs.placed)
                raise refused


#: The paper's prior holds on the paper's scale: with sigma = mu/3 against TrueSkill's fixed beta (25/6), a window
#: teaches a rating about sigma^2 / (sigma^2 + 2 beta^2) of its variance. BM25 on MS MARCO (DL19's median top-100
#: score 9.1: sigma 3.0, 0.73 beta) is that scale. Measured on DL19 and DL20 with scores x 1/20 ... x 20 (BENCHMARKS.md
#: 26): a median sigma below 0.25 beta costs 58-117% more calls; above 2 beta AcuRank stops early (30-80% fewer calls)
#: and nDCG@10 falls by 0.02-0.06. Outside these bounds (multiples of beta) the run is warned.
PRIOR_SIGMA_BOUNDS = (0.25, 2.0)


def prior_scale_problem(scores: Sequence[float], init, sigma: str = "mu/3", beta: float = ENV.beta) -> str | None:
    """Why the run's first-stage scores break the paper's prior (None when they do not): under ``--init score`` with
    sigma = mu/D, a median initial sigma outside :data:`PRIOR_SIGMA_BOUNDS` x beta (with mu/3: a median score below
    3.125 or above 25). Cosine similarities and probabilities (0..1) are too small, some learned sparse scores too
    large; ``--init zscore`` puts any of them on the paper's scale (mu = 10 + z). acurank-auto, which scales beta to
    the median sigma, is not concerned."""
    kind, x = sigma_rule(sigma)
    if Init(init) is not Init.score or kind != "ratio" or not len(scores):
        return None
    median = float(np.median(np.asarray(scores, dtype=np.float64)))
    low, high = PRIOR_SIGMA_BOUNDS
    if low * beta <= median / x <= high * beta:
        return None
    small = median / x < low * beta
    what = ("small for the paper's prior", "each window moves the ratings little and AcuRank spends more calls "
            "for the same order") if small else ("large for the paper's prior", "each window settles the ratings "
                                                 "fast and AcuRank stops early, with fewer calls and a worse order")
    return (f"the first-stage scores are {what[0]} (median {median:.3g}: sigma = mu/{x:g} = {median / x:.3g} against "
            f"TrueSkill's beta {beta:.3g}), so {what[1]}; init zscore (--init zscore, the API's init='zscore') rates "
            "them on the paper's scale (mu = 10 + z), "
            f"or scale the scores so that their median is between {low * beta * x:.3g} and {high * beta * x:.3g}")


def initial_ratings(scores: Sequence[float], init: Init, qid: str, sigma: str = "mu/3") -> tuple[np.ndarray, np.ndarray]:
    """Initial (mu, sigma) arrays from first-stage scores, per the chosen ``init``; sigma = mu / D or a
    fixed V, per ``sigma`` (see :func:`~acurank_cli.method.acurank_params.sigma_rule`; default mu/3)."""
    s = np.asarray(scores, dtype=np.float64)
    init = Init(init)
    kind, x = sigma_rule(sigma)
    if not len(s):
        return s.copy(), s.copy()
    if init is Init.uniform:
        mu = np.full(len(s), ENV.mu)
        return mu, (np.full(len(s), ENV.sigma) if (kind, x) == ("ratio", 3.0) else _sigma(mu, kind, x))
    if init is Init.zscore:
        if not np.all(np.isfinite(s)):
            raise InputError(f"query {qid}: first-stage scores contain NaN or infinity")
        scale = float(np.max(np.abs(s)))
        if scale > 0:
            s = s / scale  # z-scores do not change, and huge scores no longer overflow the mean
        sd = s.std()
        s = 10.0 + ((s - s.mean()) / sd if sd > 0 else np.zeros_like(s))
    bad = ~(np.isfinite(s) & (s > 0))
    if bad.any():
        raise InputError(
            f"query {qid}: first-stage score {s[bad][0]} is not positive or not a number; "
            "use --init zscore"
        )
    return s.copy(), _sigma(s, kind, x)


def task_priors(task: RankingTask, init: Init, sigma: str = "mu/3", m: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """A task's initial (mu, sigma): :func:`initial_ratings` of its first-stage scores, except that a passage of a
    document split into more passages than a window holds (``m``; ``task.passages``) starts with the query's widest
    sigma. A passage inherits its document's score, which says the document matches somewhere: for a document of a
    few passages that speaks for each of them, for a long one it does not say which. Under sigma = mu/3 the passages
    of a low-scored long document would start both low and nearly certain, so the one holding the answer could win
    its windows and still never enter the uncertain set (docs/long-documents.md, "The passages' prior"); a short
    document's passages keep the paper's prior (widening theirs cost nDCG@10 on SciFact, BENCHMARKS.md 27)."""
    mu, s = initial_ratings([c.score for c in task.candidates], init, task.qid, sigma)
    if task.passages and m is not None and len(s):
        s = np.where(np.asarray(task.passages) > m, s.max(), s)
    return mu, s


def _sigma(mu: np.ndarray, kind: str, x: float) -> np.ndarray:
    return mu / x if kind == "ratio" else np.full(len(mu), x)


@functools.lru_cache(maxsize=64)
def environment(beta: float) -> trueskill.TrueSkill:
    """The trueskill package's default environment with performance noise ``beta`` (the default's is 25/6)."""
    return ENV if beta == ENV.beta else trueskill.TrueSkill(beta=beta)


def library_update(mu: np.ndarray, sigma: np.ndarray, order: Sequence[int], beta: float = ENV.beta) -> None:
    """Rate one window with ``trueskill.rate``: ``order`` lists candidate indices best first; ``beta`` the
    performance noise (default the library's 25/6)."""
    env = environment(beta)
    groups = [(env.create_rating(mu[i], sigma[i]),) for i in order]
    new = env.rate(groups)  # rate's default ranks 0, 1, ...: the groups are listed best first
    for i, (r,) in zip(order, new):
        mu[i] = r.mu
        sigma[i] = r.sigma


Update = Callable[..., None]

#: What the double-precision update raises on a window whose factor graph leaves float64's range (the library's
#: "Cannot calculate correctly, set backend to 'mpmath'", and the compiled port's same exceptions), having
#: changed no rating: large windows (--window 95 on DL19's scores) put a truncation factor's argument many
#: standard deviations out, where the library's cdf underflows and w leaves (0, 1).
BEYOND_DOUBLE = (FloatingPointError, ZeroDivisionError, OverflowError)


@functools.lru_cache(maxsize=64)
def precise_environment(beta: float) -> trueskill.TrueSkill:
    """The same environment as :func:`environment`, computed with mpmath (the library's own high-precision backend,
    whose numbers have no exponent range to leave)."""
    return trueskill.TrueSkill(beta=beta, backend="mpmath")


def precise_update(mu: np.ndarray, sigma: np.ndarray, order: Sequence[int], beta: float = ENV.beta) -> None:
    """:func:`library_update` through the mpmath backend, the ratings written back as floats."""
    import mpmath

    env = precise_environment(beta)
    with mpmath.workdps(15):  # the precision pinned: mp.dps is the process's, and would change the answers
        new = env.rate([(env.create_rating(float(mu[i]), float(sigma[i])),) for i in order])
    rated = [(float(r.mu), float(r.sigma)) for (r,) in new]
    for i, (m, s) in zip(order, rated):
        mu[i], sigma[i] = m, s


def _precise_when_needed(update: Update) -> Update:
    """``update``, and where it raises :data:`BEYOND_DOUBLE` (nothing changed), the same window rated by
    :func:`precise_update`: every window size the flags accept is rated, and every window that double precision
    rates keeps today's numbers bit for bit (the fallback runs only where the update used to stop the run)."""

    @functools.wraps(update)
    def rate(mu, sigma, order, beta: float = ENV.beta, **kw) -> None:
        try:
            update(mu, sigma, order, beta=beta, **kw)
        except BEYOND_DOUBLE as exc:
            if kw.get("confidence") is not None:  # graded outcomes' soft factors: the library has none to redo with
                raise InputError(f"a window of {len(order)} documents is beyond the graded TrueSkill update's "
                                 f"precision ({exc}); use a smaller --window, or --outcome order") from None
            precise_update(mu, sigma, order, beta=beta)

    return rate


def _rows_by_loop(update: Update) -> Update:
    def update_rows(mu, sigma, order, betas, **kw) -> None:
        for g, beta in enumerate(betas):
            update(mu[g], sigma[g], order, beta=float(beta), **kw)
    return update_rows


def _rows_precise_when_needed(update_rows: Update, single: Update) -> Update:
    """A rows update (acurank-auto's noise models) whose failure (rows before the failing one may be updated)
    restores every row and rates them one by one with ``single`` (the same numbers as the rows kernel wherever it
    does not raise, :func:`_precise_when_needed` where it does)."""

    def rate_rows(mu, sigma, order, betas, **kw) -> None:
        saved = mu.copy(), sigma.copy()
        try:
            update_rows(mu, sigma, order, betas, **kw)
        except BEYOND_DOUBLE:
            mu[...], sigma[...] = saved
            _rows_by_loop(single)(mu, sigma, order, betas, **kw)

    return rate_rows


#: Registry: updater -> update(mu, sigma, order, beta=25/6) (``fast`` is the compiled factor graph); each falls back
#: to the mpmath update for a window double precision cannot rate.
UPDATERS: dict[Updater, Update] = {Updater.library: _precise_when_needed(library_update),
                                   Updater.fast: _precise_when_needed(fast_update)}

#: Registry: updater -> update_rows(mu, sigma, order, betas): one answer rates every row g (a noise model of
#: acurank-auto) with its own beta; the same numbers as the loop of single updates.
ROW_UPDATERS: dict[Updater, Update] = {
    Updater.library: _rows_precise_when_needed(_rows_by_loop(library_update), UPDATERS[Updater.library]),
    Updater.fast: _rows_precise_when_needed(fast_update_rows, UPDATERS[Updater.fast])}


def get_updater(kind: Updater) -> Update:
    """The update function for ``kind``."""
    return UPDATERS[Updater(kind)]


def get_row_updater(kind: Updater) -> Update:
    """The update of many rating rows (one a beta) for ``kind``."""
    return ROW_UPDATERS[Updater(kind)]


def update_groups(update: Callable[..., None], mu: np.ndarray, sigma: np.ndarray, groups: Sequence[Sequence[int]],
                  perms: Sequence[Sequence[int]], outcome: Outcome = Outcome.order, **kw) -> None:
    """Rate every reranked group: ``perms[j]`` lists group j's positions best first. Groups of 0 or 1
    documents were never sent and keep their ratings. ``outcome`` graded: an answer that carries scores
    updates with soft factors (:func:`confidence`); ``kw`` goes to the update (``beta``)."""
    for group, perm in zip(groups, perms):
        if len(group) >= 2:
            soft = confidence(perm) if outcome is Outcome.graded else None
            update(mu, sigma, [group[j] for j in perm], **kw, **({} if soft is None else {"confidence": soft}))


def confidence(answer: Sequence[int]) -> list[float] | None:
    """Graded outcomes: for each adjacent pair (i above j) of an answer that carries scores (an
    :class:`~acurank_cli.records.Answer`), q = sigmoid(s_i - s_j), the Bradley-Terry probability that the
    reranker's order of the pair is right (for first-token logits, exactly the two-way softmax), at least 1/2;
    None when the answer has no scores (or one is missing): the order alone then decides, as in ``order``."""
    scores = getattr(answer, "scores", None)
    if scores is None:
        return None
    ranked = [scores[j] for j in answer]
    if any(s is None or not math.isfinite(s) for s in ranked):
        return None
    return [max(0.5, 1.0 / (1.0 + math.exp(-max(-700.0, min(700.0, a - b))))) for a, b in zip(ranked, ranked[1:])]
