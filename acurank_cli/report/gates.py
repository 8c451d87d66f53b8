"""Regression gates for CI (``acurank eval RUN --qrels Q --min MEASURE=VALUE --against BASE.run``).

Two kinds, each checked per run and per measure:

* a floor: ``--min nDCG@10=0.70`` fails a run whose mean is below 0.70;
* a comparison with a base run: ``--against BASE --max-drop D`` fails a run whose mean is more than ``D``
  below the base's, or below it by a paired t-test over the queries at ``--alpha`` (two-sided p, as the
  report's marks), so that a small but consistent loss fails as well as a large one.

:func:`check` returns one :class:`GateResult` per gate; the CLI prints a line for each failed one and exits 1,
or one "gates held" line and exits 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..evaluation import Evaluation
from .significance import paired_ttest


@dataclass(frozen=True)
class Floor:
    """``--min MEASURE=VALUE``: the measure as the user named it, its output label, the value."""

    name: str
    label: str
    value: float


@dataclass(frozen=True)
class GateResult:
    """One gate on one run: whether it held, and the line that says why when it did not."""

    run: str
    measure: str
    held: bool
    line: str  # why it failed (printed when it did)
    summary: str = ""  # what was checked and found, for the "gates held" line (``nDCG@10 0.6433 >= 0.6000``)


def parse_floor(text: str) -> tuple[str, float]:
    """``MEASURE=VALUE`` -> (measure, value); a clear error naming ``--min`` otherwise."""
    name, sep, value = text.rpartition("=")
    try:
        number = float(value)
    except ValueError:
        number = None
    if not sep or not name.strip() or number is None:
        raise InputError(f"--min {text!r}: expected MEASURE=VALUE, e.g. --min nDCG@10=0.70")
    return name.strip(), number


def shown(a: float, b: float) -> tuple[str, str]:
    """Two values to 4 decimals, or with as many more as it takes to tell them apart."""
    for digits in range(4, 18):
        x, y = f"{a:.{digits}f}", f"{b:.{digits}f}"
        if x != y:
            return x, y
    return repr(a), repr(b)


def floors(run: str, evaluation: Evaluation, gates: Sequence[Floor]) -> list[GateResult]:
    out = []
    for g in gates:
        got = evaluation.mean(g.label)
        held = got >= g.value
        a, b = shown(got, g.value)
        out.append(GateResult(run, g.name, held, f"{run}: {g.name} {a} < min {b}",
                              f"{g.name} {got:.4f} >= {g.value:.4f}"))
    return out


def against(run: str, evaluation: Evaluation, base_name: str, base: Evaluation, measures: Sequence[tuple[str, str]],
            *, max_drop: float, alpha: float) -> list[GateResult]:
    """``measures``: (name as given, output label). The paired test runs over the queries both evaluations
    hold (with the default fill, every judged query)."""
    out = []
    qids = [q for q in evaluation.per_query if q in base.per_query]
    for name, label in measures:
        a = [evaluation.per_query[q][label] for q in qids]
        b = [base.per_query[q][label] for q in qids]
        mean_a, mean_b = (sum(a) / len(a), sum(b) / len(b)) if qids else (0.0, 0.0)
        drop = mean_b - mean_a
        p = paired_ttest(a, b).pvalue
        significant = drop > 0 and p == p and p < alpha  # (p is NaN with fewer than two queries)
        held = drop <= max_drop and not significant
        why = []
        if drop > max_drop:
            why.append(f"drop {drop:.4f} > max {max_drop:.4f}")
        if significant:
            why.append(f"significant (paired t, p = {p:.2g} < {alpha:g})")
        line = (f"{run}: {name} {mean_a:.4f} against {base_name} {mean_b:.4f}: " + ", ".join(why)
                + ("" if significant else f" (paired t, p = {p:.2g})"))
        out.append(GateResult(run, name, held, line, f"{name} {mean_a:.4f} against {base_name} {mean_b:.4f} "
                                                      f"(drop {max(drop, 0.0):.4f} <= {max_drop:.4f}, p = {p:.2g})"))
    return out


__all__ = ["Floor", "GateResult", "against", "floors", "parse_floor"]
