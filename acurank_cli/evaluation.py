"""Evaluation through ir_measures (pytrec_eval underneath, so trec_eval's semantics).

Measure names mean exactly what they mean in their home tool: trec_eval's (``ndcg``, ``ndcg_cut.10``
or ``ndcg_cut_10``, ``map``, ``recall.100``, ``P.10``, ``recip_rank``) and ir_measures' (``nDCG@10``,
``AP``, ``RR``, ``R@100``, ``P@10``, ``AP(rel=2)``). ``rel_level`` applies to the binary measures
(those with a ``rel`` parameter) that do not set one. A measure's key (``label``: machine outputs, per-query
dicts) is the name it was asked by (trec_eval's dotted names as trec_eval prints them: ``ndcg_cut.10`` ->
``ndcg_cut_10``); tables for people name every measure one way, by ir_measures' canonical name
(:func:`display_name`: ``ndcg_cut_10`` -> ``nDCG@10``, ``map`` -> ``AP``, ``map`` at ``-l 2`` -> ``AP(rel=2)``).

Providers' log warnings (cwl_eval's "max_rel=2 but ... 3 was observed") are shown once a process, not once
per run evaluated.

Averages: over the qrels' queries, a query missing from the run scoring 0 (``trec_eval -c``, the
default: a run that drops queries cannot look better), or with ``fill=False`` over the run's judged
queries only (trec_eval's own default).
"""

from __future__ import annotations

import contextlib
import logging
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import InputError


#: The measure every command reports unless told otherwise: the paper's nDCG@10, in trec_eval's name.
DEFAULT_MEASURE = "ndcg_cut_10"


@dataclass(frozen=True)
class Measure:
    """A measure as asked (``label``, the output key) and the ir_measures measure that computes it."""

    label: str
    measure: Any

    @property
    def name(self) -> str:
        """ir_measures' canonical name (``nDCG@10``, ``AP(rel=2)``): what tables show."""
        return str(self.measure)


def parse_measures(names: Iterable[str], rel_level: int = 1) -> list[Measure]:
    """ir_measures or trec_eval names -> measures (InputError naming the unknown one)."""
    import ir_measures

    out: list[Measure] = []
    for name in names:
        name = name.strip()
        trec = False
        try:
            found = [ir_measures.parse_measure(name)]
        except (ValueError, NameError, SyntaxError, TypeError, AttributeError):
            try:
                found, trec = list(ir_measures.parse_trec_measure(name)), True
            except (ValueError, KeyError, NameError, SyntaxError, TypeError, AttributeError):
                found = []
        if not found:  # ir_measures' names, but not in its case (ndcg@10, p@10, rr)
            found = _any_case(name)
        if not found:
            raise InputError(f"unknown measure {name!r} (trec_eval names such as ndcg_cut.10, map, recall.100, "
                             "P.10, recip_rank, ndcg; or ir_measures names such as nDCG@10, AP, RR, R@100, P@10)")
        for m in found:
            if rel_level != 1 and "rel" in m.SUPPORTED_PARAMS and m.params.get("rel") is None:
                m = m(rel=rel_level)
            _check_params(name, m)
            label = (name.replace(".", "_") if trec else name) if len(found) == 1 else str(m)
            provider_for(m)  # computable here, or a clear error before any run is read
            out.append(Measure(label, m))
    return out


def _check_params(name: str, measure: Any) -> None:
    """ir_measures asserts a measure's parameters when a provider is asked (``SDCG@10`` lacks ``max_rel``,
    ``INST(T=1)`` has an int for a float): one line naming each fault and what the measure takes."""
    try:
        measure.validate_params()
        return
    except AssertionError as exc:
        faults = [f"unknown {p!r}" for p in measure.params if p not in measure.SUPPORTED_PARAMS]
        for param, info in measure.SUPPORTED_PARAMS.items():
            if param not in measure.params:
                if getattr(info, "required", False):
                    faults.append(f"{param} is required")
            elif not info.validate(measure.params[param]):
                kind = getattr(info, "dtype", None)
                faults.append(f"{param}={measure.params[param]!r} is not a valid value"
                              + (f" (a {kind.__name__})" if isinstance(kind, type) else ""))
        takes = ", ".join(f"{k} ({v.desc})" if getattr(v, "desc", None) else k
                          for k, v in measure.SUPPORTED_PARAMS.items())
        raise InputError(f"measure {name!r}: {'; '.join(faults) or exc} ({measure.NAME} takes: {takes})") from None


#: ir_measures families whose values lie in [0, 1] (normalised gains, precisions, recalls, reciprocal ranks); the
#: others (counts such as NumRet, unnormalised DCG) are only >= 0.
UNIT_INTERVAL = frozenset({"AP", "MAP", "RR", "MRR", "nDCG", "NDCG", "P", "Precision", "R", "Recall", "Rprec", "RPrec",
                           "Bpref", "BPref", "Judged", "Success", "SetP", "SetR", "SetF", "SetAP", "SetRelP", "infAP",
                           "ERR", "IPrec", "Accuracy", "Compat", "StRecall", "alpha_nDCG", "α_nDCG", "nERR_IA", "P_IA",
                           "AP_IA", "MAP_IA", "ERR_IA", "nNRBP", "NERR8", "NERR9", "NERR10", "NERR11", "RBP", "SDCG"})


def value_range(measure: Any) -> tuple[float, float]:
    """The values ``measure`` (an ir_measures measure) can take: (0, 1) for the normalised ones, else (0, inf)."""
    return (0.0, 1.0) if getattr(measure, "NAME", "") in UNIT_INTERVAL else (0.0, float("inf"))


def display_name(label: str, rel_level: int = 1) -> str:
    """The one name tables give the measure asked as ``label``: ir_measures' (``ndcg_cut_10`` -> ``nDCG@10``)."""
    found = parse_measures([label], rel_level)
    return found[0].name if len(found) == 1 else label


def _any_case(name: str) -> list:
    import re

    import ir_measures

    head = re.match(r"[^@(]+", name)
    if head is None:
        return []
    family = next((k for k in ir_measures.measures.registry if k.lower() == head.group(0).lower()), None)
    if family is None:
        return []
    try:
        return [ir_measures.parse_measure(family + name[head.end():])]
    except (ValueError, NameError, SyntaxError, TypeError, AttributeError):
        return []


def measure_name(name: str) -> str:
    """The output key of one measure name (``ndcg_cut.10`` -> ``ndcg_cut_10``)."""
    return parse_measures([name])[0].label


@dataclass(frozen=True)
class Evaluation:
    """Per-query values and their means over the queries averaged (see ``fill``)."""

    measures: tuple[str, ...]
    per_query: dict[str, dict[str, float]]
    fill: bool = True

    def mean(self, measure: str) -> float:
        """Mean over the averaged queries."""
        return statistics.fmean(v[measure] for v in self.per_query.values()) if self.per_query else 0.0

    @property
    def averaging(self) -> str:
        """How the means were taken, for output headers."""
        n = len(self.per_query)
        if self.fill:
            return f"{n} judged queries (the qrels'; missing from the run -> 0, as trec_eval -c)"
        return f"{n} judged queries in the run (--no-fill, as trec_eval without -c)"


def evaluate(
    run: dict[str, dict[str, float]],
    qrels: dict[str, dict[str, int]],
    measures: Iterable[str] = (DEFAULT_MEASURE,),
    rel_level: int = 1,
    fill: bool = True,
) -> Evaluation:
    """Evaluate ``run`` (qid -> docid -> score) against ``qrels`` with ir_measures' pytrec_eval provider."""
    import ir_measures

    parsed = parse_measures(measures, rel_level)
    labels = tuple(m.label for m in parsed)
    if fill:
        per_query = {q: {label: 0.0 for label in labels} for q in qrels}
    else:
        per_query = {q: {label: 0.0 for label in labels} for q in qrels if q in run}
    by_measure: dict[Any, list[str]] = {}
    for m in parsed:
        by_measure.setdefault(m.measure, []).append(m.label)
    by_provider: dict[str, list[Any]] = {}
    for measure in by_measure:
        by_provider.setdefault(provider_for(measure), []).append(measure)
    with _each_provider_warning_once():
        for name, wanted in by_provider.items():
            for metric in ir_measures.providers.registry[name].iter_calc(wanted, qrels, run):
                if metric.query_id in per_query:
                    for label in by_measure[metric.measure]:
                        per_query[metric.query_id][label] = float(metric.value)
    return Evaluation(labels, per_query, fill)


class _Once(logging.Filter):
    """Passes a (logger, message) the first time this process sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


_ONCE = _Once()


@contextlib.contextmanager
def _each_provider_warning_once() -> Iterator[None]:
    """While runs are evaluated, each ir_measures logger (``ir_measures.cwl_eval``, ...) lets a message through
    once a process: a report over 30 runs says cwl_eval's clipping once, not 30 times. Whatever handles the
    records (ir_measures' own stderr handler, an application's) is left as it is."""
    names = ["ir_measures", *(n for n in logging.root.manager.loggerDict if n.startswith("ir_measures."))]
    loggers = [logging.getLogger(n) for n in names]
    for logger in loggers:
        logger.addFilter(_ONCE)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(_ONCE)


def provider_for(measure: Any) -> str:
    """The ir_measures provider that computes ``measure``: pytrec_eval (trec_eval's semantics) wherever it can,
    otherwise the first installed one that can (``judged`` for Judged@k, ``gdeval`` for ERR@k, ...); a measure
    that none installed computes is an InputError naming what would."""
    import ir_measures

    registry = ir_measures.providers.registry
    if registry["pytrec_eval"].supports(measure):
        return "pytrec_eval"
    able = [name for name, p in registry.items() if p.supports(measure)]
    for name in able:
        if registry[name].is_available():
            return name
    needs = f" (computed by the {', '.join(able)} provider of ir_measures, not installed here)" if able else ""
    raise InputError(f"measure {measure} cannot be computed here{needs}; measures pytrec_eval computes: nDCG@k, "
                     "AP, P@k, R@k, RR, Rprec, Bpref, NumRet, ... (trec_eval's); Judged@k with ir_measures' judged")


# -- the calibration measures (report calibration, the benchmarks): F1 at a cut, AUC, ECE, Brier ---------------


def check_judged(run: Iterable[str], judged: Iterable[str], qrels: str, path: str) -> None:
    """A run that shares no query with its qrels is refused (``path``: the run's name): qrels of another dataset
    would score it 0 on every query, in silence (``eval`` and ``report html`` alike)."""
    run, judged = list(run), list(judged)
    if run and judged and not set(run) & set(judged):
        raise InputError(f"shares no query with the qrels {qrels} (run: {len(run)} queries, e.g. {run[0]}; qrels: "
                         f"{len(judged)}, e.g. {judged[0]}): qrels of another dataset?", path)


def coverage(run: Iterable[str], judged: Iterable[str], fill: bool, no_fill: str) -> str | None:
    """What the mean is over where the run holds only some of the qrels' queries (None: it holds them all), in every
    entrance's words but its way of saying "no fill" (``no_fill``: ``--no-fill``, MCP's ``fill: false``)."""
    judged = set(judged)
    shared = len(set(run) & judged)
    if shared >= len(judged):
        return None
    how = (f"the mean counts the others as 0 ({no_fill}: over the run's judged queries only)" if fill
           else f"the mean is over those ({no_fill})")
    return f"{shared} of the {len(judged)} qrels queries are in the run; {how}"


def f1_at(labels: Sequence[int], k: int) -> float:
    """F1 of keeping the first ``k`` of a ranked list whose 0/1 labels are given, recall over the relevant
    candidates; with none relevant, the empty answer scores 1 and any other 0."""
    relevant = sum(labels)
    if relevant == 0:
        return 1.0 if k == 0 else 0.0
    hit = sum(labels[:k])
    return 0.0 if hit == 0 else 2.0 * hit / (k + relevant)


def f1_kept(labels: Sequence[int], kept: Sequence[bool]) -> float:
    """F1 of keeping the documents flagged in ``kept`` (any positions), recall over the relevant candidates; with none
    relevant, the empty answer scores 1 and any other 0."""
    relevant, size = sum(labels), sum(map(bool, kept))
    if relevant == 0:
        return 1.0 if size == 0 else 0.0
    hit = sum(y for y, k in zip(labels, kept) if k)
    return 0.0 if hit == 0 else 2.0 * hit / (size + relevant)


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """ROC AUC of scores where ``pos`` should be higher (ties count half); None without both kinds."""
    if not pos or not neg:
        return None
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def oracle_f1(labels: Sequence[int]) -> float:
    """The best F1 any cut of this ranked list reaches (the oracle cut's)."""
    return max(f1_at(labels, k) for k in range(len(labels) + 1))


def calibration_error(p: Sequence[float], y: Sequence[int], bins: int = 10) -> tuple[float, list[dict[str, float]]]:
    """Expected calibration error over ``bins`` equal-width bins (weighted by their documents) and the reliability
    table: per non-empty bin its range, documents, mean P(relevant) and share relevant."""
    table = []
    n = len(p)
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [i for i, v in enumerate(p) if (lo <= v < hi) or (b == bins - 1 and v == 1.0)]
        if not members:
            continue
        mean_p = sum(p[i] for i in members) / len(members)
        share = sum(y[i] for i in members) / len(members)
        total += len(members) * abs(mean_p - share)
        table.append({"lo": lo, "hi": hi, "documents": len(members), "p": mean_p, "relevant": share})
    return (total / n if n else 0.0), table


def brier(p: Sequence[float], y: Sequence[int]) -> float:
    return sum((a - b) ** 2 for a, b in zip(p, y)) / max(1, len(p))
