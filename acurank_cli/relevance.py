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
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import InputError

#: the features of a document's final rating that the map reads, in order
FEATURES = ("logit_p_topk", "z_mu", "log_rank")
#: with a pivot in every window (``--pivot``), two more: the document's standardised distance above the pivot,
#: (mu - mu_pivot) / sqrt(sigma^2 + sigma_pivot^2), and the share of the query's candidates rated above the pivot
PIVOT_FEATURES = (*FEATURES, "z_pivot", "share_above_pivot")
#: the format's name and version, the file's first key
FORMAT = "acurank-calibration/1"
#: p_topk is clipped to [CLIP, 1 - CLIP] before its logit (p_topk is exactly 0 or 1 for settled documents)
CLIP = 1e-6
#: the L2 penalty on the standardised coefficients (keeps a separable training set finite)
L2 = 1e-4


def features(ratings: Sequence[Any], pivot: tuple[float, float] | None = None) -> list[tuple[float, ...]]:
    """Each document's features, in the order given: ``ratings`` are a query's final DocRatings (mu, sigma, p_topk,
    rank); ``pivot`` the pivot's (mu, sigma) where one was rated (then :data:`PIVOT_FEATURES`)."""
    if not ratings:
        return []
    x = feature_matrix([r.mu for r in ratings], [0.0 if r.p_topk is None else r.p_topk for r in ratings],
                       [r.rank for r in ratings], [r.sigma for r in ratings], pivot)
    return [tuple(map(float, row)) for row in x]


def feature_matrix(mu: Sequence[float], p_topk: Sequence[float], rank: Sequence[int],
                   sigma: Sequence[float] | None = None, pivot: tuple[float, float] | None = None):
    """The features as a numpy matrix, one row a document: logit(p_topk) (clipped), (mu - mean) / sd within the
    query (population sd; 0 where all mu are equal), log(rank by mu); with a ``pivot`` (mu, sigma), also
    (mu - mu_pivot) / sqrt(sigma^2 + sigma_pivot^2) and the share of candidates with mu above the pivot's. The one
    place they are defined."""
    import numpy as np

    mu = np.asarray(mu, dtype=float)
    p = np.clip(np.asarray(p_topk, dtype=float), CLIP, 1.0 - CLIP)
    sd = mu.std()
    z = (mu - mu.mean()) / sd if sd > 0 else np.zeros_like(mu)
    columns = [np.log(p / (1.0 - p)), z, np.log(np.asarray(rank, dtype=float))]
    if pivot is not None:
        pmu, psigma = pivot
        spread = np.sqrt(np.asarray(sigma, dtype=float) ** 2 + psigma ** 2)
        columns += [(mu - pmu) / spread, np.full(len(mu), float((mu > pmu).mean()))]
    return np.column_stack(columns)


@dataclass(frozen=True)
class CalibrationMap:
    """P(grade >= ``grade``) = sigmoid(intercept + sum_j coef_j (x_j - center_j) / scale_j) over :data:`FEATURES`;
    ``fit`` says what it was fit on (queries, documents, relevant documents, the run's method, reranker and k)."""

    grade: int
    center: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    fit: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pivoted(self) -> bool:
        """Fit on runs with a pivot in every window (its features need one)."""
        return len(self.coef) == len(PIVOT_FEATURES)

    def probabilities(self, ratings: Sequence[Any], pivot: tuple[float, float] | None = None) -> list[float]:
        """P(relevant) of each of a query's final ratings, in the order given (``pivot``: its rating, for a map fit
        with one)."""
        if self.pivoted != (pivot is not None):
            raise InputError("a calibration map fit " + ("with a pivot needs a run with --pivot" if self.pivoted else
                                                         "without a pivot cannot read a run with --pivot"))
        if not ratings:
            return []
        raw = self.of_matrix(feature_matrix([r.mu for r in ratings],
                                            [0.0 if r.p_topk is None else r.p_topk for r in ratings],
                                            [r.rank for r in ratings], [r.sigma for r in ratings], pivot))
        return monotone(raw, [r.rank for r in ratings]).tolist()

    def of_matrix(self, X):
        """P(relevant) of every row of a feature matrix (numpy, one row a document)."""
        import numpy as np

        z = self.intercept + ((np.asarray(X, dtype=float) - self.center) / self.scale) @ np.asarray(self.coef)
        return 1.0 / (1.0 + np.exp(-z))

    def probability(self, x: Sequence[float]) -> float:
        """P(relevant) of one document's features."""
        return float(self.of_matrix([x])[0])

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "grade": self.grade, "features": list(PIVOT_FEATURES if self.pivoted else FEATURES),
                "center": list(self.center),
                "scale": list(self.scale), "coef": list(self.coef), "intercept": self.intercept, "fit": dict(self.fit)}

    @property
    def digest(self) -> str:
        """What a run's fingerprint records of the map (another map is another run)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]

    def save(self, path: str | Path) -> None:
        from .io.plan import replacing

        with replacing(Path(path)) as fh:
            fh.write(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path, flag: str = "--calibration") -> "CalibrationMap":
        """Read a map file; any fault is one line naming the file (and the flag)."""
        name = str(path)
        try:
            rec = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{flag}: no such file (fit one with --calibrate QRELS --calibration FILE)", name) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{flag}: not a calibration map ({exc})", name) from None
        return cls.of(rec, name, flag)

    @classmethod
    def of(cls, rec: Any, name: str = "calibration", flag: str = "calibration") -> "CalibrationMap":
        """A map from its JSON object (what :meth:`to_json` writes), checked."""
        if not isinstance(rec, dict) or rec.get("format") != FORMAT:
            raise InputError(f"{flag}: not a calibration map (its \"format\" must be {FORMAT!r})", name)
        names = list(rec.get("features") or ())
        if names not in (list(FEATURES), list(PIVOT_FEATURES)):
            raise InputError(f"{flag}: features {rec.get('features')!r}, this version reads {list(FEATURES)} (with "
                             f"--pivot: {list(PIVOT_FEATURES)})", name)
        try:
            vectors = [tuple(float(v) for v in rec[key]) for key in ("center", "scale", "coef")]
            grade, intercept = int(rec["grade"]), float(rec["intercept"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{flag}: a calibration map needs grade, center, scale, coef and intercept ({exc!r})",
                             name) from None
        if any(len(v) != len(names) for v in vectors) or not all(s > 0 for s in vectors[1]):
            raise InputError(f"{flag}: center, scale and coef need {len(names)} numbers each, scales > 0", name)
        if not all(math.isfinite(v) for vec in vectors for v in vec) or not math.isfinite(intercept):
            raise InputError(f"{flag}: a calibration map's numbers must be finite", name)
        return cls(grade, *vectors, intercept, dict(rec.get("fit") or {}))


def monotone(probabilities: Sequence[float], rank: Sequence[int]):
    """P(relevant) that never rises down the ranking: the map's values in ``rank`` order (1 = first) replaced by their
    decreasing isotonic fit (pool adjacent violators, scipy's ``isotonic_regression``): each run of documents whose
    values rose down the order gets its mean, so the query's mean P(relevant) (its expected number of relevant
    documents) is kept, the order is never contradicted, ``--score p_relevant`` keeps the method's order (ties keep
    it: sorts are stable) and every cut keeps a prefix. The map's features (logit p_topk, z(mu), log rank) are
    collinear, and a fit may give them opposite signs (z +2.54 with log rank +1.06 on DL19), which alone let a lower
    rank read as more probable (issue 83)."""
    import numpy as np
    from scipy.optimize import isotonic_regression

    p = np.asarray(probabilities, dtype=float)
    if len(p) < 2:
        return p
    order = np.argsort(np.asarray(rank), kind="stable")
    out = np.empty_like(p)
    out[order] = isotonic_regression(p[order], increasing=False).x
    return out


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def fit(rows: Sequence[tuple[float, ...]], labels: Sequence[int], grade: int, about: Mapping[str, Any] | None = None
        ) -> CalibrationMap:
    """The maximum-likelihood logistic map from feature rows to 0/1 labels (scipy's L-BFGS on the log-loss, a small
    L2 penalty on the standardised coefficients). Needs relevant and non-relevant documents both."""
    import numpy as np
    from scipy.optimize import minimize

    X = np.asarray(rows, dtype=float)
    y = np.asarray(labels, dtype=float)
    positives = int(y.sum())
    if len(y) == 0 or positives in (0, len(y)):
        raise InputError(f"--calibrate: the judged queries' candidates hold {positives} relevant (grade >= {grade}) "
                         f"and {len(y) - positives} other documents; a map needs both")
    center = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale <= 0] = 1.0
    Z = (X - center) / scale

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = w[0] + Z @ w[1:]
        # log(1 + e^z) - y z, stably; its gradient sigmoid(z) - y
        value = np.logaddexp(0.0, z) - y * z
        g = 1.0 / (1.0 + np.exp(-z)) - y
        grad = np.concatenate([[g.sum()], Z.T @ g]) / len(y)
        grad[1:] += 2 * L2 * w[1:]
        return float(value.mean() + L2 * (w[1:] @ w[1:])), grad

    result = minimize(loss, np.zeros(X.shape[1] + 1), jac=True, method="L-BFGS-B")
    w = result.x
    info = {"documents": len(y), "relevant": positives, **dict(about or {})}
    return CalibrationMap(grade, tuple(map(float, center)), tuple(map(float, scale)), tuple(map(float, w[1:])),
                          float(w[0]), info)


def p_none(probabilities: Sequence[float]) -> float:
    """P(no candidate is relevant), the documents taken as independent: prod (1 - p)."""
    log = sum(math.log1p(-min(p, 1.0 - 1e-15)) for p in probabilities)
    return math.exp(log)


# -- cuts --------------------------------------------------------------------------------------------------


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
                         "maximises the expected F1)")

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


@dataclass(frozen=True)
class Relevance:
    """What a run does with relevance (``--calibration``, ``--cut``, ``--score p_relevant``): the map, the cut
    (None: every document kept) and whether the run's score column is P(relevant)."""

    calibration: CalibrationMap
    cut: Cut | None = None
    score: bool = False
    #: the map's file (None: given as a map)
    source: str | None = None
    #: with a cut: aim AcuRank's uncertain set at the cut's boundary (``--cut-target cut``, the default with a map fit
    #: with a pivot) or at the top k (``topk``, the default without: the cut's target then cost more calls for a lower
    #: F1, BENCHMARKS.md section 25)
    target: bool = False

    def described(self) -> dict[str, Any]:
        """What the run's fingerprint records."""
        out: dict[str, Any] = {"calibration": self.calibration.digest, "grade": self.calibration.grade}
        if self.cut is not None:
            out["cut"] = str(self.cut)
        if self.score:
            out["score"] = "p_relevant"
        if self.cut is not None:
            out["target"] = "cut" if self.target else "topk"
        return out

    def aimed(self, strategy):
        """``strategy`` with its uncertain set at the cut's boundary where a cut is asked and targeted and the method
        can aim (AcuRank's family); otherwise the strategy itself."""
        if self.cut is None or not self.target or not hasattr(strategy, "aimed_at"):
            return strategy
        return strategy.aimed_at(CutTarget(self.calibration, self.cut))



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


@dataclass(frozen=True)
class Calibrate:
    """Fit a map on a run's judged queries (``--calibrate QRELS``): the qrels, the grade and the map file to write."""

    qrels: str
    grade: int
    output: str


@dataclass(frozen=True)
class Spelling:
    """How an entrance names what a pivot's rules speak of, so that each rule is said once (:func:`pivoted`,
    :func:`check_pivot`, :meth:`Pivot.add_texts`) and every entrance says it in its own words: the command line's
    flags (``rerank``; ``serve`` and ``mcp`` at start), the API's keywords, a server request's fields."""

    pivot: str
    calibration: str
    passages: str
    #: what the rules call the unit that has a pivot or none ("this run", "this call", "this request")
    this: str
    #: how the simulated reranker's pivot is asked for, and the setting of its grade
    simulated: str
    grade: str
    #: how pivot passages are given, for a reranker that reads texts
    texts: str


SAID = {
    "cli": Spelling(pivot="--pivot", calibration="--calibration", passages="--passages", this="this run",
                    simulated="--pivot simulated", grade="--sim-pivot-grade", texts="a file of 'qid<TAB>pivot passage'"),
    "api": Spelling(pivot="pivot", calibration="calibration", passages="passages", this="this call",
                    simulated="pivot='simulated'", grade="sim_pivot_grade", texts="each query's pivot passage"),
    "request": Spelling(pivot="pivot", calibration="this server's --calibration map", passages="max_chunks_per_doc",
                        this="this request", simulated="pivot \"simulated\"", grade="the server's --sim-pivot-grade",
                        texts="the query's pivot passage"),
}


def pivoted(strategy: Any, said: Spelling) -> Any:
    """The strategy with a pivot in every window (a method that rates none is refused in one line): the first of a
    pivot's rules, at every entrance."""
    if not hasattr(strategy, "with_pivot"):
        raise InputError(f"{said.pivot}: method {strategy.name!r} rates no pivot (the acurank methods do)")
    return strategy.with_pivot()


def check_pivot(given: bool, passages: Any, calibration: CalibrationMap | None, said: Spelling) -> None:
    """A pivot's other rules, after the method's (:func:`pivoted`) and after the map's own (:func:`check_applicable`),
    at every entrance: a pivot joins windows of documents ranked whole; a map fit with a pivot reads where each
    document stands against one, so it needs one, and a map fit without one reads none (``calibration``: the map
    applied; None: none, or a map being fit)."""
    if given and passages is not None:
        raise InputError(f"{said.pivot} with {said.passages}: a pivot joins windows of documents ranked whole")
    if calibration is not None and calibration.pivoted != given:
        raise InputError(f"{said.calibration}: " + (
            f"the map was fit with a pivot in every window, and {said.this} has none: give {said.pivot}"
            if not given else
            f"the map was fit without a pivot, and {said.this} has one: leave {said.pivot} out, or fit a map with one"))


@dataclass(frozen=True)
class Pivot:
    """A reference player in every window (``--pivot``): ``simulated`` (the simulated reranker's document of grade
    --sim-pivot-grade) or a file of ``qid<TAB>passage`` (a pivot passage written for each query, for the rerankers
    that read texts)."""

    source: str
    #: each query's pivot passage (None: the simulated reranker's)
    texts: Mapping[str, str] | None = None

    @classmethod
    def of(cls, value: str | None) -> "Pivot | None":
        if value is None:
            return None
        if value == "simulated":
            return cls(value)
        from .io.collection_files import read_topics

        return cls(value, read_topics(value))

    @classmethod
    def given(cls, texts: Mapping[str, str], said: Spelling) -> "Pivot":
        """Each query's pivot as the API and a server request give it: its passage, or ``"simulated"`` for the
        simulated reranker's pivot (every query's)."""
        if all(t == "simulated" for t in texts.values()):
            return cls("simulated")
        return cls(said.pivot, dict(texts))

    def described(self) -> str:
        """What the run's fingerprint records: ``simulated``, or the passages' digest."""
        if self.texts is None:
            return "simulated"
        return hashlib.sha256(json.dumps(self.texts, sort_keys=True).encode()).hexdigest()[:16]

    def pivoted(self, strategy: Any) -> Any:
        """The strategy with a pivot in every window (the command line's: :func:`pivoted`)."""
        return pivoted(strategy, SAID["cli"])

    def add_texts(self, needs_texts: bool, backend: str, qids: Sequence[str], docs: dict,
                  said: Spelling = SAID["cli"]) -> None:
        """Checked against the backend and the queries (one line each, before any call); for passages, every query's
        pivot passage is added to ``docs`` under its pivot id."""
        from .records import Doc, pivot_id

        if self.texts is None and needs_texts:
            raise InputError(f"{said.simulated} is the simulated reranker's pivot; reranker {backend} reads texts: "
                             f"give {said.texts}")
        if self.texts is not None and not needs_texts:
            raise InputError(f"{said.pivot}{' ' + self.source if said.pivot.startswith('--') else ''}: the simulated "
                             f"reranker reads no texts; give {said.simulated} (its grade: {said.grade})")
        if self.texts is not None:
            missing = [q for q in qids if q not in self.texts]
            if missing:
                raise InputError(f"no pivot passage for query {missing[0]} ({len(missing)} queries without one)",
                                 self.source)
            for q in qids:
                docs[pivot_id(q)] = Doc(pivot_id(q), self.texts[q])


SCORES = ("mu", "p_relevant")
TARGETS = ("cut", "topk")


def options(calibration: str | None, calibrate: str | None = None, grade: int | None = None, cut: str | None = None,
            score: str | None = None, target: str | None = None) -> tuple[Relevance | None, Calibrate | None]:
    """The relevance flags checked (each fault one line naming the flag) and the map read: what the run applies
    and what it fits (at most one of them)."""
    if score is not None and score not in SCORES:
        raise InputError(f"--score {score!r}: must be one of {', '.join(SCORES)}")
    if target is not None and target not in TARGETS:
        raise InputError(f"--cut-target {target!r}: must be one of {', '.join(TARGETS)}")
    if target is not None and cut is None:
        raise InputError("--cut-target says where a cut's calls go; give --cut")
    parsed = None if cut is None else Cut.parse(cut)
    if grade is not None and calibrate is None:
        raise InputError("--relevant-grade is the grade --calibrate fits for; a map applied has its own")
    if calibration is None:
        for flag, value in (("--calibrate", calibrate), ("--cut", cut), ("--score p_relevant", score == "p_relevant" or None)):
            if value is not None:
                raise InputError(f"{flag} needs --calibration MAP.json (the map {'to write' if flag == '--calibrate' else 'that gives P(relevant)'})")
        return None, None
    if calibrate is not None:
        if parsed is not None or score == "p_relevant":
            raise InputError("--calibrate fits --calibration on this run's queries, so it cannot also cut or score them "
                             "(apply the map to other queries: a second run without --calibrate)")
        return None, Calibrate(calibrate, 1 if grade is None else grade, calibration)
    fitted = CalibrationMap.load(calibration)
    aim = target == "cut" if target is not None else fitted.pivoted
    return Relevance(fitted, parsed, score == "p_relevant", calibration, aim), None


def loaded(value: Any, flag: str = "calibration") -> CalibrationMap | None:
    """A map given as a file's path or as a CalibrationMap (None: none)."""
    if value is None or isinstance(value, CalibrationMap):
        return value
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        return CalibrationMap.load(value, flag)
    raise TypeError("calibration must be a map file's path or an acurank_cli.relevance.CalibrationMap")


def keep_maps_k(calibration: CalibrationMap | None, method: str, options: dict, flag: str = "calibration") -> None:
    """A map is fit at one k (p_topk's): a method that takes k and was given none keeps the map's for every call
    (a call's ``top_k`` or ``top_n`` then cuts the list but does not change k); another k given is refused. The one
    owner of the rule at every entrance: ``rerank``/``baseline`` (``--calibration``), the API, serve and MCP
    (through :class:`~acurank_cli.run.pipeline.Methods`)."""
    from .method.registry import method_options

    k = None if calibration is None else calibration.fit.get("k")
    if k is None or "k" not in method_options(method):
        return
    if options.get("k") is not None and int(options["k"]) != int(k):
        give = f"--k {k}" if flag.startswith("-") else f"k = {k}"  # the flag, or the keyword, as the entrance takes it
        raise InputError(f"{flag}: the map was fit on p_topk at k = {k} and this k is {options['k']}: give {give}, "
                         f"or fit a map at k = {options['k']}")
    options["k"] = int(k)


#: how a user says a map may be applied where it was not fit for (another reranker or method, or its own queries)
MISMATCH = {"cli": "--allow-map-mismatch", "api": "allow_map_mismatch=True"}


def check_origin(calibration: CalibrationMap | None, backend: str | None, method: str, qids: Sequence[str] = (),
                 allowed: bool = False, api: bool = False) -> None:
    """A map applies to runs of the reranker and method it was fit with, on queries it was not fit on: its
    P(relevant) reads ratings that one reranker's answers under one method made, and measured on its own fitting
    queries it flatters itself (their ECE is a fraction of held-out queries'). Refused in one line, before any call,
    unless ``allowed``. A map written before it recorded these (no ``backend``, no ``qids``) is not checked for them,
    nor is the reranker of a backend given built (the API's instance: None)."""
    if calibration is None or allowed:
        return
    flag, allow = ("calibration", MISMATCH["api"]) if api else ("--calibration", MISMATCH["cli"])
    fit = calibration.fit
    for what, was, now in (("reranker", fit.get("backend"), backend), ("method", fit.get("method"), method)):
        if was is not None and now is not None and str(was) != str(now):
            raise InputError(f"{flag}: the map was fit with {what} {was} and this run's {what} is {now}: its "
                             f"P(relevant) reads the ratings one {what} makes; fit a map with {now}, or say {allow}")
    seen = sorted(set(fit.get("qids") or ()) & set(qids))
    if seen:
        raise InputError(f"{flag}: the map was fit on {len(seen)} of these queries (e.g. {seen[0]}), and on its own "
                         f"fitting queries it looks better calibrated than it is; apply it to other queries, or say "
                         f"{allow}")


def check_applicable(strategy: Any, passages: Any, flag: str = "--calibration") -> None:
    """A map applies to a method with ratings (a cutoff k) over documents ranked whole: anything else is refused in
    one line, before any call."""
    if strategy.cutoff is None:
        raise InputError(f"{flag}: method {strategy.name!r} keeps no ratings to calibrate (the acurank and "
                         "acurank-auto families do)")
    if passages is not None:
        raise InputError(f"{flag} with {'--' if flag.startswith('--') else ''}passages: P(relevant) is calibrated on "
                         "documents ranked whole; rank them whole, or without a map")


def judged(relevance: Relevance, ranking: Sequence[Any], ratings: Mapping[str, Any],
           pivot: tuple[float, float] | None = None) -> tuple[list[Any], Any]:
    """A query's ranking (Ranked, by mu) with its final ratings (and the pivot's, where one was rated): the ranking as
    written (ordered by P(relevant) when that is the score column, cut when asked) and its
    :class:`~acurank_cli.records.RelevanceSummary`."""
    from .records import Ranked, RelevanceSummary

    probs = relevance.calibration.probabilities([ratings[r.docid] for r in ranking], pivot)
    order = list(range(len(ranking)))
    if relevance.score:
        order.sort(key=lambda i: -probs[i])
    kept: int | None = None
    if relevance.cut is not None:
        keep = relevance.cut.positions(probs)
        order = [i for i in order if i in keep]
        kept = len(order)
    out = [Ranked(ranking[i].docid, probs[i] if relevance.score else ranking[i].score) for i in order]
    summary = RelevanceSummary(grade=relevance.calibration.grade, p_none=p_none(probs),
                               p={ranking[i].docid: probs[i] for i in range(len(ranking))}, kept=kept)
    return out, summary
