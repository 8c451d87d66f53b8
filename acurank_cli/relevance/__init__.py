"""Where relevance ends: P(relevant) per document from a calibration map fit on judged queries, the probability
that a query has no relevant candidate, and the cut rules (docs/relevance.md).

The design (and its assumptions, measured in BENCHMARKS.md section 25):

* **What is calibrated.** A method with ratings ends with a posterior N(mu, sigma^2) per document and p_topk =
  P(rank <= k). Those are relative: p_topk sums to k over every query. A :class:`CalibrationMap` turns three
  features of a document's final rating into P(grade >= g): logit(p_topk), mu standardised within the query, and
  log(rank by mu). It is a logistic regression (Platt scaling over several features), fit by maximum likelihood
  on the documents of judged queries (:func:`fit`; unjudged documents count as not relevant, as trec_eval does).
  The map is a file: fit it on some queries (``acurank rerank --calibrate QRELS --calibration MAP.json``), apply
  it to others (``--calibration MAP.json``); never both on the same queries.
* **What it assumes.** The queries it is applied to are like those it was fit on: the same reranker, method, k,
  candidate depth and first-stage, and the same share of relevant candidates. The features say how a document
  stands among its query's candidates, not how relevant the candidates are as a whole, so a collection whose
  queries have fewer relevant candidates than the fitting queries gets probabilities too high by about the
  difference (measured: DL19 -> DL20).
* **Nothing here.** P(no relevant candidate) = prod_i (1 - p_i): the documents' relevance taken as independent
  given the map.
* **Cuts.** ``p:X`` keeps the documents with P(relevant) >= X; ``f1`` keeps the top K (by P(relevant)) that
  maximises the expected F1, 2 sum_{i<=K} p_i / (K + sum_i p_i), against the empty answer, whose F1 is 1 when no
  candidate is relevant (expected: P(none)).

The package's rooms: :mod:`.maps` (the map, its features and fit, the isotonic step), :mod:`.cuts` (P(none), the
cuts, the cut's target), :mod:`.pivot` (the pivot and its rules), :mod:`.rules` (the flags and the map's rules at
every entrance), :mod:`.shift` (whether a map meets queries unlike those it was fit on); the calibration measures
are :mod:`acurank_cli.evaluation`'s.
"""

from __future__ import annotations

from ..evaluation import auc, brier, calibration_error, f1_at, f1_kept, oracle_f1
from .cuts import Cut, CutTarget, expected_f1_cut, p_none
from .maps import (ABSOLUTE, EM_BOUNDARY, EM_MIN_QUERIES, CLIP, FEATURES, FORMAT, L2, PIVOT_FEATURES, CalibrationMap, absolute_of, adjusted,
                   check_fittable, em_share, feature_matrix, features, fit, monotone)
from .maps import _sigmoid  # noqa: F401 - the tests check it against the library
from .pivot import SAID, Pivot, Spelling, check_pivot, pivoted, zscore_way
from .shift import Shift, signals_of
from .rules import (SCORES, TARGETS, Calibrate, Relevance, aims, check_applicable, check_origin, check_target,
                    cut_asked, judge, judged, Judgement, keep_maps_settings, loaded, options)

__all__ = ["ABSOLUTE", "EM_BOUNDARY", "EM_MIN_QUERIES", "absolute_of", "adjusted", "em_share", "CLIP", "FEATURES", "FORMAT", "L2", "PIVOT_FEATURES", "SAID", "SCORES", "TARGETS", "Calibrate", "check_fittable",
           "CalibrationMap", "Cut", "CutTarget", "Pivot", "Relevance", "Shift", "Spelling", "aims", "auc", "brier", "calibration_error",
           "check_applicable", "check_origin", "check_pivot", "check_target", "cut_asked", "expected_f1_cut", "f1_at", "f1_kept", "feature_matrix",
           "features", "fit", "judge", "judged", "Judgement", "keep_maps_settings", "loaded", "monotone", "oracle_f1", "options", "p_none", "pivoted", "signals_of", "zscore_way"]
