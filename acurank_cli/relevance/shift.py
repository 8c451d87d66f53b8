"""Whether a map meets queries unlike those it was fit on, from what its features cannot see: the first-stage
scores. A map reads where each document stands among its query's candidates (relative features), so it cannot see
a first stage or a collection whose scores sit elsewhere; its fit records, for each fitting query, the first-stage
top score and median score (:data:`SIGNALS`), and a run that applies it compares its own queries' with a two-sided
Mann-Whitney U test per signal (scipy's), Bonferroni-corrected over the signals: a shift is said when the smaller p,
times the number of signals, is below :data:`ALPHA` (and each side has at least :data:`MIN_QUERIES` queries).

A map's lists and these must also be about as long (:data:`LENGTH_RATIO`): its features read where a document
stands in its list, and a list's median first-stage score moves with its length, so lists of another length are said
as such (not as another collection).

What it cannot see: a collection with the first stage's scores of the fitting one but another share of relevant
candidates (DL19 against DL20: even the true share separates them only at p = 0.09, Mann-Whitney). The backend's own
score (MiniLM's cosine: each query's top and median) is not a signal: it separates DL19 from DL20 at p = 0.78 and
DL23 from either less often than the first stage does. BENCHMARKS.md 35 measures both."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

#: the per-query first-stage statistics a map records and a run compares
SIGNALS = ("top", "median")
#: the family-wise false-alarm rate: same-collection queries are told a shift at most this often
ALPHA = 0.01
#: fewer queries on either side: too few to say
MIN_QUERIES = 5


#: a query's candidates: the map's lists and these must be about as long (their median counts within this ratio)
LENGTH_RATIO = 0.9


def by_query(tasks: Iterable[Any], key: Callable[[Any], Any] = lambda task: task.qid) -> dict[Any, tuple[float, ...]]:
    """Each query's signals (:data:`SIGNALS`: its first-stage top and median score) and its number of candidates,
    by ``key`` (its qid; tasks with candidates): three numbers a query, kept while a run's tasks stream by."""
    out: dict[str, tuple[float, ...]] = {}
    for task in tasks:
        scores = [c.score for c in task.candidates]
        if scores:
            out[key(task)] = (float(max(scores)), float(statistics.median(scores)), len(scores))
    return out


def signals_of(tasks: Iterable[Any]) -> dict[str, list[float]]:
    """The signals of the queries given, in their order, each a list (what a map's fit records)."""
    return columns(by_query(tasks).values())


def columns(rows: Iterable[tuple[float, ...]]) -> dict[str, list[float]]:
    rows = list(rows)
    return {name: [r[i] for r in rows] for i, name in enumerate((*SIGNALS, "candidates"))}


@dataclass(frozen=True)
class Shift:
    """The comparison of a run's queries with the map's fitting queries: the signal that differs most, its medians
    on both sides, its corrected p, and whether that is a shift."""

    signal: str
    here: float
    fit: float
    p: float
    queries: int
    fitted: int

    @property
    def shifted(self) -> bool:
        return self.p < ALPHA

    def line(self, flag: str = "--calibration") -> str:
        """The one warning line."""
        if self.signal == "candidates":
            return (f"warning: {flag}: these {self.queries} queries have {self.here:g} candidates each (the median) and "
                    f"the map was fit on lists of {self.fit:g}: its features read where a document stands in its list, "
                    "so its P(relevant) may not hold here; rerank lists as long as the map's, or fit a map on lists "
                    "of this length")
        return (f"warning: {flag}: these {self.queries} queries' first-stage scores differ from the {self.fitted} the "
                f"map was fit on ({self.signal} score of a query: median {self.here:.4g} here, {self.fit:.4g} there; "
                f"Mann-Whitney p = {self.p:.2g}, corrected for {len(SIGNALS)} signals): its P(relevant) may not hold "
                f"here; fit a map on some judged queries of this collection (docs/relevance.md)")

    def as_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "here": self.here, "fit": self.fit, "p": self.p, "queries": self.queries,
                "fitted": self.fitted, "shifted": self.shifted}


def compared(fit: Mapping[str, Any], tasks: Iterable[Any]) -> Shift | None:
    """A run's queries (``tasks``) against the signals a map's fit recorded (``fit``: the map's ``fit`` record); None
    where the map recorded none (written before it did) or either side has fewer than :data:`MIN_QUERIES` queries."""
    recorded = fit.get("signals") or {}
    if not all(len(recorded.get(name) or ()) >= MIN_QUERIES for name in SIGNALS):
        return None
    here = signals_of(tasks)
    if len(here["top"]) < MIN_QUERIES:
        return None
    return _compared(recorded, here)


def _compared(recorded: Mapping[str, Any], here: Mapping[str, list[float]]) -> Shift:
    """The test: lists of another length than the map's (their median number of candidates beyond
    :data:`LENGTH_RATIO`; then the first-stage signals, whose median moves with a list's length, are not compared: p
    0), else per signal a two-sided Mann-Whitney U of the queries here against the recorded ones; the smallest p,
    times the number of signals (Bonferroni). A map written before it recorded its lists' lengths: the signals alone."""
    from scipy.stats import mannwhitneyu

    if recorded.get("candidates") and here.get("candidates"):
        mine, theirs = statistics.median(here["candidates"]), statistics.median(recorded["candidates"])
        if not LENGTH_RATIO <= mine / theirs <= 1 / LENGTH_RATIO:
            return Shift("candidates", mine, theirs, 0.0, len(here["candidates"]), len(recorded["candidates"]))
    tests = []
    for name in SIGNALS:
        p = float(mannwhitneyu(here[name], recorded[name], alternative="two-sided").pvalue)
        tests.append((min(1.0, p * len(SIGNALS)), name))
    p, name = min(tests)
    return Shift(name, statistics.median(here[name]), statistics.median(recorded[name]), p, len(here[name]),
                 len(recorded[name]))


class CalibrationShiftWarning(UserWarning):
    """The API's warning that its map meets queries unlike those it was fit on (:class:`ShiftWatch`)."""


#: queries a stream of calls (the API's, a server's requests) gathers before it is compared, once
WATCH_QUERIES = 20


def asked(task: Any) -> str:
    """The question a task asks, as the watch counts it: its text with its spacing and case let go."""
    return " ".join(str(task.query).split()).casefold()


class ShiftWatch:
    """A stream of calls watched for a shift (the API's ``Reranker`` and ``serve``: queries come a few at a time): the
    first :data:`WATCH_QUERIES` queries' signals are gathered, then compared once with the map's (one test, so the
    false-alarm rate stays :data:`ALPHA`); :attr:`shift` holds the comparison from then on. Thread-safe."""

    def __init__(self, fit: Mapping[str, Any]):
        import threading

        self.fit = fit
        self.rows: dict[Any, tuple[float, ...]] = {}
        self.shift: Shift | None = None
        self.lock = threading.Lock()
        #: whether the map recorded signals (a map written before it did is not watched)
        self.watching = all(len((fit.get("signals") or {}).get(name) or ()) >= MIN_QUERIES for name in SIGNALS)

    def see(self, tasks: Iterable[Any]) -> Shift | None:
        """Gather these queries' signals, each question once by its text (:func:`asked`: a server's request has no
        qid of its own, and the API's calls and batches give default ones), so that a question asked again, under
        any qid, in any spacing or case, counts once: 20 copies of one query are no sample of a collection. Returns
        the comparison the moment it is made (None before and after: it is made once)."""
        if not self.watching:
            return None
        with self.lock:
            if self.shift is not None:
                return None
            for seen, row in by_query(tasks, asked).items():
                if len(self.rows) < WATCH_QUERIES:
                    self.rows.setdefault(seen, row)
            if len(self.rows) < WATCH_QUERIES:
                return None
            self.shift = _compared(self.fit.get("signals"), columns(self.rows.values()))
            return self.shift


__all__ = ["ALPHA", "CalibrationShiftWarning", "LENGTH_RATIO", "ShiftWatch", "WATCH_QUERIES", "MIN_QUERIES", "SIGNALS", "Shift", "by_query", "columns", "compared", "signals_of"]
