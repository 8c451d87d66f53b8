"""Evaluation with pytrec_eval (trec_eval semantics); missing queries score 0 as with ``trec_eval -c``."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Iterable

import pytrec_eval

from .errors import InputError

#: Friendly aliases -> trec_eval measure names.
ALIASES = {"ndcg@10": "ndcg_cut_10", "ndcg10": "ndcg_cut_10", "ndcg": "ndcg_cut_10", "recall@100": "recall_100"}


def measure_name(name: str) -> str:
    """Normalise a measure name (``nDCG@10`` -> ``ndcg_cut_10``, ``P@10`` -> ``P_10``)."""
    key = name.strip()
    if key.lower() in ALIASES:
        return ALIASES[key.lower()]
    m = re.fullmatch(r"(?i)(p|recall|ndcg)@(\d+)", key)
    if m:
        base = {"p": "P", "recall": "recall", "ndcg": "ndcg_cut"}[m.group(1).lower()]
        return f"{base}_{m.group(2)}"
    return key


def _family(measure: str) -> str:
    m = re.fullmatch(r"(.+?)_(\d+(?:\.\d+)?)", measure)
    return m.group(1) if m and m.group(1) in pytrec_eval.supported_measures else measure


@dataclass(frozen=True)
class Evaluation:
    """Per-query values (qrels' queries; missing from the run -> 0) and their means."""

    measures: tuple[str, ...]
    per_query: dict[str, dict[str, float]]

    def mean(self, measure: str) -> float:
        """Mean over the qrels' queries."""
        return statistics.fmean(v[measure] for v in self.per_query.values()) if self.per_query else 0.0


def evaluate(
    run: dict[str, dict[str, float]],
    qrels: dict[str, dict[str, int]],
    measures: Iterable[str] = ("ndcg_cut_10",),
    rel_level: int = 1,
) -> Evaluation:
    """Evaluate ``run`` (qid -> docid -> score) against ``qrels``; binary measures use ``rel_level``."""
    names = tuple(measure_name(m) for m in measures)
    for name in names:
        if _family(name) not in pytrec_eval.supported_measures:
            raise InputError(f"unknown measure {name!r} (trec_eval names, e.g. ndcg_cut_10, map, recall_100, P_10)")
    per_query: dict[str, dict[str, float]] = {q: {m: 0.0 for m in names} for q in qrels}
    # relevance_level only affects binary measures; nDCG always uses the graded judgements.
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(names), relevance_level=rel_level)
    for qid, values in evaluator.evaluate(run).items():
        for m in names:
            per_query[qid][m] = float(values[m])
    return Evaluation(names, per_query)
