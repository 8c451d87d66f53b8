"""Where relevance ends: P(no relevant candidate), the cut rules (``p:X``, ``f1``) and the target that aims
AcuRank's uncertain set at a cut's boundary."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..errors import InputError
from .maps import CalibrationMap, feature_matrix


def p_none(probabilities: Sequence[float]) -> float:
    """P(no candidate is relevant), the documents taken as independent: prod (1 - p)."""
    log = sum(math.log1p(-min(p, 1.0 - 1e-15)) for p in probabilities)
    return math.exp(log)


@dataclass(frozen=True)
class Cut:
    """Where a query's list stops: ``rule`` "p" (keep P(relevant) >= ``value``) or "f1" (the expected-F1 cut)."""

    rule: str
    value: float | None = None

    @classmethod
    def parse(cls, text: str, flag: str = "--cut") -> "Cut":
        spec = text.strip().lower()
        if spec == "f1":
            return cls("f1")
        if spec.startswith("p:"):
            try:
                value = float(spec[2:])
            except ValueError:
                value = math.nan
            if 0.0 <= value <= 1.0:
                return cls("p", value)
        raise InputError(f"{flag} {text!r}: must be p:X (keep P(relevant) >= X, 0 <= X <= 1) or f1 (the cut that "
                         "maximises the expected F1)", field=flag)

    def __str__(self) -> str:
        return "f1" if self.rule == "f1" else f"p:{self.value:g}"

    def positions(self, probabilities: Sequence[float]) -> set[int]:
        """The positions of the documents the cut keeps (for "f1": the K most probable, ties by position)."""
        keep = self.keep(probabilities)
        if isinstance(keep, int):
            return set(sorted(range(len(probabilities)), key=lambda i: -probabilities[i])[:keep])
        return keep

    def keep(self, probabilities: Sequence[float]) -> int | set[int]:
        """What to keep of a list whose P(relevant) are ``probabilities`` (any order): for "p", the set of the
        positions kept; for "f1", K: keep the K most probable (0: nothing here)."""
        if self.rule == "p":
            return {i for i, p in enumerate(probabilities) if p >= self.value}
        return expected_f1_cut(probabilities)


def expected_f1_cut(probabilities: Sequence[float]) -> int:
    """K maximising 2 sum_{i<=K} p_(i) / (K + sum p) over the probabilities sorted down, against K = 0, whose expected
    F1 is P(none) (an empty answer is right exactly when nothing is relevant); ties: the smaller K."""
    ps = sorted(probabilities, reverse=True)
    total = sum(ps)
    best, best_k = p_none(ps), 0
    running = 0.0
    for k, p in enumerate(ps, 1):
        running += p
        value = 2.0 * running / (k + total)
        if value > best + 1e-12:
            best, best_k = value, k
    return best_k


# -- measures (report calibration, the benchmark) ---------------------------------------------------------------


@dataclass(frozen=True)
class CutTarget:
    """Where AcuRank's uncertain set is aimed when a cut is asked (``--cut``): the boundary at the cut's size K under
    the current ratings, so that the calls decide which documents fall on either side of the cut rather than which
    make the top k. P(relevant) is read as the map reads final ratings, from the exact p_topk under the ratings now."""

    calibration: CalibrationMap
    cut: Cut

    def size(self, mu, prob, sigma=None, pivot: tuple[float, float] | None = None) -> int:
        """K: the documents the cut keeps under ratings ``mu`` (``sigma``; the ``pivot``'s (mu, sigma) where one is
        rated) whose top-k probabilities are ``prob``."""
        import numpy as np

        mu = np.asarray(mu, dtype=float)
        order = np.argsort(-mu, kind="stable")
        rank = np.empty(len(mu))
        rank[order] = np.arange(1, len(mu) + 1)
        probs = self.calibration.of_matrix(feature_matrix(mu, prob, rank, sigma, pivot)).tolist()
        return len(self.cut.positions(probs))
