"""The calibration map: P(relevant) from a document's final rating (its features, the logistic map, its file),
its fit on judged queries, and the isotonic step that keeps P(relevant) from rising down the ranking."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import InputError

#: the features of a document's final rating that the map reads, in order
FEATURES = ("logit_p_topk", "z_mu", "log_rank")
#: with a pivot in every window (``--pivot``), two more: the document's standardised distance above the pivot,
#: (mu - mu_pivot) / sqrt(sigma^2 + sigma_pivot^2), and the share of the query's candidates rated above the pivot
PIVOT_FEATURES = (*FEATURES, "z_pivot", "share_above_pivot")
#: with ``--absolute``, last: the backend's own score of the document alone (a pointwise backend's: minilm's cosine,
#: ce:'s logit), which sees what the relative features cannot: how relevant the query's candidates are as a whole
ABSOLUTE = "absolute"
#: the feature lists a map may read (each of its own length: a map's coefficients say which it reads)
FEATURE_SETS = (FEATURES, PIVOT_FEATURES, (*FEATURES, ABSOLUTE), (*PIVOT_FEATURES, ABSOLUTE))
#: the format's name and version, the file's first key
FORMAT = "acurank-calibration/1"
#: p_topk is clipped to [CLIP, 1 - CLIP] before its logit (p_topk is exactly 0 or 1 for settled documents)
CLIP = 1e-6
#: the L2 penalty on the standardised coefficients (keeps a separable training set finite)
L2 = 1e-4


def features(ratings: Sequence[Any], pivot: tuple[float, float] | None = None,
             absolute: Sequence[float] | None = None) -> list[tuple[float, ...]]:
    """Each document's features, in the order given: ``ratings`` are a query's final DocRatings (mu, sigma, p_topk,
    rank); ``pivot`` the pivot's (mu, sigma) where one was rated (then :data:`PIVOT_FEATURES`); ``absolute`` each
    document's absolute score (then :data:`ABSOLUTE` last)."""
    if not ratings:
        return []
    x = feature_matrix([r.mu for r in ratings], [0.0 if r.p_topk is None else r.p_topk for r in ratings],
                       [r.rank for r in ratings], [r.sigma for r in ratings], pivot, absolute)
    return [tuple(map(float, row)) for row in x]


def absolute_of(docids: Sequence[str], absolute: Mapping[str, float] | None, unknown: float | None = None
                ) -> list[float] | None:
    """Each document's absolute score, in the order given, from a query's outcome (``absolute``: by docid, from
    :meth:`~acurank_cli.records.QueryOutcome.absolute_scores`; None: the backend gave none). A document no window
    sent (a first pass's last window of one) has none: it gets the query's lowest, as the first stage put it last. A
    query none of whose documents was sent (one candidate) gets ``unknown`` for each (a map's: its mean over the fit;
    None: none to give). Said in docs/relevance.md."""
    if absolute is None:
        return None
    known = [absolute[d] for d in docids if d in absolute]
    if not known:
        return None if unknown is None else [float(unknown)] * len(docids)
    low = min(known)
    return [float(absolute.get(d, low)) for d in docids]


def feature_matrix(mu: Sequence[float], p_topk: Sequence[float], rank: Sequence[int],
                   sigma: Sequence[float] | None = None, pivot: tuple[float, float] | None = None,
                   absolute: Sequence[float] | None = None):
    """The features as a numpy matrix, one row a document: logit(p_topk) (clipped), (mu - mean) / sd within the
    query (population sd; 0 where all mu are equal), log(rank by mu); with a ``pivot`` (mu, sigma), also
    (mu - mu_pivot) / sqrt(sigma^2 + sigma_pivot^2) and the share of candidates with mu above the pivot's; with
    ``absolute``, the backend's own score of each document, as it gave it. The one place they are defined."""
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
    if absolute is not None:
        columns.append(np.asarray(absolute, dtype=float))
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
    def names(self) -> tuple[str, ...]:
        """The features it reads, in order: the one of :data:`FEATURE_SETS` as long as its coefficients (each set is
        of another length)."""
        return next(f for f in FEATURE_SETS if len(f) == len(self.coef))

    @property
    def pivoted(self) -> bool:
        """Fit on runs with a pivot in every window (its features need one)."""
        return "z_pivot" in self.names

    @property
    def absolute(self) -> bool:
        """Fit with the backend's absolute score (``--absolute``): its runs need a backend that gives one."""
        return ABSOLUTE in self.names

    @property
    def share(self) -> float | None:
        """The share of relevant documents among the candidates it was fit on (what ``--prior em`` adjusts from);
        None where the map does not record it."""
        n, hits = self.fit.get("documents"), self.fit.get("relevant")
        if not isinstance(n, int) or not isinstance(hits, int) or not 0 < hits < n:
            return None
        return hits / n

    def probabilities(self, ratings: Sequence[Any], pivot: tuple[float, float] | None = None,
                      absolute: Sequence[float] | None = None) -> list[float]:
        """P(relevant) of each of a query's final ratings, in the order given (``pivot``: its rating, for a map fit
        with one; ``absolute``: each document's absolute score, for a map fit with them)."""
        if self.pivoted != (pivot is not None):
            raise InputError("a calibration map fit " + ("with a pivot needs a run with --pivot" if self.pivoted else
                                                         "without a pivot cannot read a run with --pivot"))
        if self.absolute and absolute is None:
            raise InputError("a calibration map fit with --absolute reads the reranker's own score of each document, "
                             "and these answers carry none (a pointwise reranker's do: minilm, ce:)")
        if not ratings:
            return []
        raw = self.of_matrix(feature_matrix([r.mu for r in ratings],
                                            [0.0 if r.p_topk is None else r.p_topk for r in ratings],
                                            [r.rank for r in ratings], [r.sigma for r in ratings], pivot,
                                            absolute if self.absolute else None))
        return monotone(raw, [r.rank for r in ratings]).tolist()

    def of_matrix(self, X):
        """P(relevant) of every row of a feature matrix (numpy, one row a document)."""
        import numpy as np

        with np.errstate(over="ignore", invalid="ignore"):  # a map's huge coefficients: z at +-inf, P at 1 or 0
            z = self.intercept + ((np.asarray(X, dtype=float) - self.center) / self.scale) @ np.asarray(self.coef)
            if np.isnan(z).any():  # +inf and -inf met in one sum: no probability to give
                raise InputError("calibration: the map's coefficients overflow on these documents' features "
                                 "(a map fit by --calibrate never does): fit the map again")
            return 1.0 / (1.0 + np.exp(-z))

    def probability(self, x: Sequence[float]) -> float:
        """P(relevant) of one document's features."""
        return float(self.of_matrix([x])[0])

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "grade": self.grade, "features": list(self.names),
                "center": list(self.center),
                "scale": list(self.scale), "coef": list(self.coef), "intercept": self.intercept, "fit": dict(self.fit)}

    @property
    def digest(self) -> str:
        """What a run's fingerprint records of the map (another map is another run)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]

    def save(self, path: str | Path) -> None:
        from ..io.plan import replacing

        with replacing(Path(path)) as fh:
            fh.write(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path, flag: str = "--calibration") -> "CalibrationMap":
        """Read a map file; any fault is one line naming the file (and the flag)."""
        name = str(path)
        if not name.strip():  # a blank name reads as the working folder
            raise InputError(f"{flag} {name!r}: give the map's file (fit one with --calibrate QRELS --calibration FILE)")
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
        if names not in [list(f) for f in FEATURE_SETS]:
            raise InputError(f"{flag}: features {rec.get('features')!r}, this version reads {list(FEATURES)} (with "
                             f"--pivot: {list(PIVOT_FEATURES)}; with --absolute, {ABSOLUTE!r} last)", name)
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
        if grade < 1:  # P(grade >= 0) is 1 for every document, judged or not: no map to fit or apply
            raise InputError(f"{flag}: a calibration map's grade is {grade}; relevant means a grade of at least 1", name)
        return cls(grade, *vectors, intercept, _fit_of(rec.get("fit"), name, flag))


def _fit_of(fit: Any, name: str, flag: str) -> dict:
    """A map's record of its fit, checked where every entrance keeps what it says (the k and init a method keeps:
    :func:`~acurank_cli.relevance.keep_maps_settings`): a k that is no whole number of at least 1, or an init no method
    starts ratings with, is the map's fault, said naming the file (an edited map crashed, or was blamed on a flag
    never given)."""
    from ..method.choices import Init
    from ..params import at_least

    if fit is None:
        return {}
    if not isinstance(fit, dict):
        raise InputError(f"{flag}: a calibration map's \"fit\" must be an object, got {type(fit).__name__}", name)
    k, init = fit.get("k"), fit.get("init")
    if k is not None and not at_least(1).contains(k):  # the domain of a method's k
        raise InputError(f"{flag}: the map's fit.k is {k!r}: a map is fit at a whole number k of at least 1", name)
    if init is not None and init not in {i.value for i in Init}:
        raise InputError(f"{flag}: the map's fit.init is {init!r}: ratings start with one of "
                         f"{', '.join(i.value for i in Init)}", name)
    for key in ("method", "backend"):
        if fit.get(key) is not None and not isinstance(fit[key], str):
            raise InputError(f"{flag}: the map's fit.{key} is {fit[key]!r}: the name it was fit with", name)
    qids = fit.get("qids")
    if qids is not None and (not isinstance(qids, list) or not all(isinstance(q, str) for q in qids)):
        raise InputError(f"{flag}: the map's fit.qids is {qids!r}: the list of its fitting queries' ids", name)
    _signals_of(fit.get("signals"), name, flag)
    return dict(fit)


def _signals_of(signals: Any, name: str, flag: str) -> None:
    """A map's recorded first-stage signals (what :func:`~acurank_cli.relevance.shift.compared` reads): an object of
    lists of finite numbers (a hand-edited one crashed the comparison)."""
    if signals is None:
        return
    if not isinstance(signals, dict):
        raise InputError(f"{flag}: the map's fit.signals is {signals!r}: an object of lists of numbers", name)
    for key, values in signals.items():
        if not isinstance(values, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            raise InputError(f"{flag}: the map's fit.signals.{key} must be a list of finite numbers", name)


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


def adjusted(probabilities: Sequence[float], fit_share: float, share: float):
    """P(relevant) moved from the share of relevant candidates a map was fit on (``fit_share``) to another
    (``share``), by Bayes' rule on the odds (Saerens, Latinne and Decaestecker 2002): p' = a p / (a p + b (1 - p))
    with a = share / fit_share and b = (1 - share) / (1 - fit_share). Increasing in p, so a list's order holds."""
    import numpy as np

    p = np.asarray(probabilities, dtype=float)
    a, b = share / fit_share, (1.0 - share) / (1.0 - fit_share)
    return a * p / (a * p + b * (1.0 - p))


#: EM stops when the share moves less than this, or after :data:`EM_MOST` steps
EM_TOL = 1e-7
EM_MOST = 1000
#: ``--prior em`` needs at least this many queries: over 10 or 20 of DL23's its share ran to 0 or 0.019 (0.057 to
#: 0.088 true), from 30 it held (a held-out trial, 2026-12-01); within one query it fails (BENCHMARKS.md 38)
EM_MIN_QUERIES = 30
#: a share EM ends below this (or above 1 minus it) is its boundary: no share in (0, 1) fits the map's probabilities
#: on these candidates (a map far from its own collection), and the map is left as fit
EM_BOUNDARY = 1e-3


def em_share(probabilities: Sequence[float], fit_share: float) -> tuple[float, int]:
    """The share of relevant documents among these candidates, their labels unseen, by EM (Saerens, Latinne and
    Decaestecker 2002): from ``fit_share``, repeat share <- the mean of :func:`adjusted` (the probabilities moved to
    the share so far) until it moves less than :data:`EM_TOL`; returns (the share, the steps taken). Each p is
    clipped to [1e-9, 1 - 1e-9] first (a p of exactly 0 or 1 never moves)."""
    import numpy as np

    p = np.clip(np.asarray(probabilities, dtype=float), 1e-9, 1 - 1e-9)
    share = fit_share
    for step in range(1, EM_MOST + 1):
        new = float(adjusted(p, fit_share, share).mean())
        if abs(new - share) < EM_TOL:
            return new, step
        share = new
    return share, EM_MOST


def _check_both(relevant: int, other: int, grade: int) -> None:
    if not relevant or not other:
        raise InputError(f"--calibrate: the judged queries' candidates hold {relevant} relevant (grade >= {grade}) "
                         f"and {other} other documents; a map needs both")


def check_fittable(qrels: Mapping[str, Mapping[str, int]], tasks: Iterable[Any], grade: int, source: str) -> None:
    """Before any call: a map can be fit on these tasks' candidates (``source``: the qrels' file), that is some query
    judged, and relevant (grade >= ``grade``) and other candidates both among the judged queries' (an unjudged
    candidate of a judged query is not relevant, as the fit counts it); refused after the run otherwise."""
    judged = relevant = other = 0
    for task in tasks:
        grades = qrels.get(task.qid)
        if grades is None:
            continue
        judged += 1
        hits = sum(1 for c in task.candidates if grades.get(c.docid, 0) >= grade)
        relevant, other = relevant + hits, other + len(task.candidates) - hits
    if not judged:
        raise InputError(f"--calibrate {source}: it judges none of this run's queries; a map is fit on judged queries "
                         "(give the qrels of these queries)")
    _check_both(relevant, other, grade)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def fit(rows: Sequence[tuple[float, ...]], labels: Sequence[int], grade: int, about: Mapping[str, Any] | None = None
        ) -> CalibrationMap:
    """The maximum-likelihood logistic map from feature rows to 0/1 labels (scipy's L-BFGS on the log-loss, a small
    L2 penalty on the standardised coefficients). Needs relevant and non-relevant documents both. ``about``: what
    the map records of its fit (its text values redacted here: a map file holds no secret, whoever fits it)."""
    import numpy as np
    from scipy.optimize import minimize

    X = np.asarray(rows, dtype=float)
    y = np.asarray(labels, dtype=float)
    positives = int(y.sum())
    _check_both(positives, len(y) - positives, grade)
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
    from .. import redaction

    said = {key: redaction.text(value) if isinstance(value, str) else value for key, value in dict(about or {}).items()}
    info = {"documents": len(y), "relevant": positives, **said}
    return CalibrationMap(grade, tuple(map(float, center)), tuple(map(float, scale)), tuple(map(float, w[1:])),
                          float(w[0]), info)
