"""AcuRank's parameters in the paper's names (each an option declared once in
:mod:`acurank_cli.method.shared_options`, with its domain), the initial-sigma rule and the query-set budget. The
closed sets of choices are in :mod:`acurank_cli.method.choices` (re-exported here). No numpy: the CLI reads
these to build its flags before any work starts."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ..errors import InputError
from ..params import ParameterError, check_domains
from .choices import Init, Outcome, Partition, Pool, StopRule, Uncertainty, Updater
from .shared_options import (BUDGET, BUDGET_TOTAL, BUDGET_WAVE, EPS, INIT, K, MAX_ROUNDS, OUTCOME,
                      PARTITION, SEED, SIGMA, STOP, TAU, UNCERTAINTY, UPDATER, WINDOW, Option)
from ..plugins import declared_options
from ..params import at_least

__all__ = ["AcuRankParams", "AutoParams", "Init", "Outcome", "Partition", "Pool", "SetBudget", "StopRule", "Uncertainty", "Updater",
           "beta_grid", "coerce_choices", "set_budget", "sigma_rule"]


def sigma_rule(value: object) -> tuple[str, float]:
    """How initial sigma follows from initial mu (``--sigma``): ``mu/D`` (sigma = mu / D, D > 0; the paper's
    default mu/3 and its ablation mu/2) or ``fixed:V`` (sigma = V > 0 for every document, the ablation's
    fixed 8). Returns ("ratio", D) or ("fixed", V); a ParameterError for anything else."""
    text = value.strip() if isinstance(value, str) else ""
    for prefix, kind in (("mu/", "ratio"), ("fixed:", "fixed")):
        if text.startswith(prefix):
            try:
                x = float(text[len(prefix):])
            except ValueError:
                break
            if math.isfinite(x) and x > 0:
                return kind, x
    raise ParameterError("sigma", value, "mu/D or fixed:V with D, V > 0 (e.g. mu/3, mu/2, fixed:8)")


@dataclass(frozen=True)
class SetBudget:
    """A query-set budget (``--budget-total``): calls for the whole run, as an average per query (``9x``) or
    a total (``900``), spent ``wave`` optional iterations at a time on the most uncertain queries."""

    per_query: float | None
    total: int | None
    wave: int

    def calls(self, queries: int) -> int:
        """The run's total call budget for ``queries`` queries."""
        return self.total if self.total is not None else math.floor(self.per_query * queries + 1e-9)


def set_budget(value: object, wave: int = 8) -> SetBudget:
    """``--budget-total``: ``Bx`` (B calls per query on average, B > 0) or a whole number of calls (> 0)."""
    text = value.strip().lower() if isinstance(value, str) else str(value)
    try:
        if text.endswith("x"):
            per_query = float(text[:-1])
            if math.isfinite(per_query) and per_query > 0:
                return SetBudget(per_query, None, wave)
        elif int(text) > 0:
            return SetBudget(None, int(text), wave)
    except ValueError:
        pass
    raise ParameterError("budget_total", value, "Bx (B calls per query on average, e.g. 9x) or a total number of calls "
                         "> 0", flag="--budget-total")


def coerce_choices(record: object) -> None:
    """Turn the plain strings of a frozen record's enum-valued options into their enums (or a ParameterError)."""
    for f, decl in declared_options(type(record)):
        kind = decl.kind
        if not isinstance(kind, type) or not issubclass(kind, enum.Enum):
            continue
        value = getattr(record, f.name)
        try:
            object.__setattr__(record, f.name, kind(value))
        except ValueError:
            raise ParameterError(f.name, value, "one of " + ", ".join(v.value for v in kind),
                                 decl.cli_flag) from None


def check_outcome(record: object) -> None:
    """Graded outcomes soften the factor graph's truncations: only the fast updater implements that."""
    if record.outcome is Outcome.graded and record.updater is not Updater.fast:
        raise ParameterError("outcome", "graded", "order with {updater} (graded outcomes need the fast updater's "
                             "soft factors)", flag="--outcome", updater=("--updater", "library"))


class _CallCap:
    """The initial pass, the total call cap N and the checks shared by AcuRank's families (acurank-N,
    acurank-auto-N)."""

    m: int
    cap: int | None
    sigma: str
    family = "acurank"

    def check_shared(self) -> None:
        """Every parameter's domain, plain strings accepted for the enum-valued ones, the outcome with its
        updater, the sigma rule."""
        check_domains(self)
        coerce_choices(self)
        check_outcome(self)
        sigma_rule(self.sigma)

    def initial_calls(self, n: int) -> int:
        """Windows of the initial pass over n candidates: ceil(n / m)."""
        return math.ceil(n / self.m)

    def check_task(self, n: int, qid: str) -> None:
        """acurank-N promises at most N calls: N must cover the initial pass over n candidates."""
        first = self.initial_calls(n)
        if self.cap is not None and self.cap < first:
            raise InputError(f"{self.family}-{self.cap}: query {qid} has {n} candidates, whose initial pass alone "
                             f"takes {first} calls of m = {self.m}; use {self.family}-N with N >= {first}, or fewer "
                             "candidates (the command line's --depth)")


@dataclass(frozen=True)
class AcuRankParams(_CallCap):
    """Parameters in the paper's names: cutoff k, tolerance eps, stop threshold tau, window m,
    adaptive-group budget B (``budget``) or total call cap N (``cap``, acurank-N)."""

    k: int = K(10)
    #: eps < 1/2, or {eps < s_i < 1 - eps} is empty
    eps: float = EPS(0.01)
    tau: int = TAU(10)  # 0: never stop on |C| < tau (only when C is empty or B is spent)
    #: a window of one document is never sent: m >= 2
    m: int = WINDOW(20)
    budget: int = BUDGET(100)
    #: the total call cap N of acurank-N (from the method's name, not an option)
    cap: int | None = Option(domain=at_least(1), flag="acurank-N", cli=False)(None)
    init: Init = INIT(Init.score)
    partition: Partition = PARTITION(Partition.sequential)
    stop: StopRule = STOP(StopRule.uncertain)
    seed: int = SEED(0)
    updater: Updater = UPDATER(Updater.fast)
    #: Round cap R (--max-rounds): the initial pass is round 1, each adaptive iteration one round; the
    #: last allowed round is a final pass over {s_i > eps}, as when |C| < tau. None: no cap.
    max_rounds: int | None = MAX_ROUNDS(None)
    #: Which documents are uncertain (--uncertainty): threshold (the paper's s_i), exact (p_i = P(r_i <= k))
    #: or entropy (of the rank distribution truncated at k); see acurank_cli/method/uncertainty.py.
    uncertainty: Uncertainty = UNCERTAINTY(Uncertainty.threshold)
    #: Initial sigma (--sigma): mu/3 (the paper), mu/2, or fixed:V (the supplementary variance ablation)
    sigma: str = SIGMA("mu/3")
    #: A query-set budget (--budget-total 9x | 900): None, every budget is per query; see run/budget_grants.py
    budget_total: str | None = BUDGET_TOTAL(None)
    #: Optional iterations granted per allocation wave under a query-set budget (--budget-wave)
    budget_wave: int = BUDGET_WAVE(8)
    #: What an answer tells the ratings (--outcome): its order (the paper), or graded by the reranker's scores
    outcome: Outcome = OUTCOME(Outcome.order)

    def __post_init__(self) -> None:
        """Check every parameter (see :meth:`_CallCap.check_shared`) and the query-set budget."""
        self.check_shared()
        if self.budget_total is not None:
            object.__setattr__(self, "budget_total", str(self.budget_total).strip())
            set_budget(self.budget_total)

    @property
    def set_budget(self) -> SetBudget | None:
        """The query-set budget, if any."""
        return None if self.budget_total is None else set_budget(self.budget_total, self.budget_wave)


def beta_grid(value: object) -> tuple[tuple[float, ...], int]:
    """acurank-auto's ``--beta-grid``: positive multiples of the median initial sigma, comma-separated,
    increasing, as numbers or fractions (``1/16``); the one marked ``*`` is used before any answer has told
    the models apart (default: the first). Returns (factors, start index); a ParameterError otherwise."""
    text = value if isinstance(value, str) else ""
    factors, start = [], 0
    try:
        for j, part in enumerate(x.strip() for x in text.split(",")):
            if part.startswith("*"):
                start, part = j, part[1:].strip()
            num, _, den = part.partition("/")
            x = float(num) / (float(den) if den else 1.0)
            if not (math.isfinite(x) and x > 0):
                raise ValueError
            factors.append(x)
    except (ValueError, ZeroDivisionError):
        factors = []
    if not factors or any(b <= a for a, b in zip(factors, factors[1:])) or text.count("*") > 1:
        raise ParameterError("beta_grid", value, "increasing positive multiples, comma-separated, at most one marked * "
                             "to start from (default: the first; e.g. 1/16,1/8,*1/4,1,4)", flag="--beta-grid")
    return tuple(factors), start


@dataclass(frozen=True)
class AutoParams(_CallCap):
    """acurank-auto: AcuRank's parameters that it keeps (k, eps, tau, m, B or N, the rating init), and its
    model of the reranker: a grid of performance-noise levels beta (multiples of the median initial sigma)
    among which the answers choose, pooled over the run or per query (see acurank_cli/method/auto.py)."""

    family = "acurank-auto"

    k: int = K(10)
    #: acurank-auto spends more calls on what stays uncertain than acurank (acurank-H's eps) within a smaller
    #: budget; acurank-auto-N keeps acurank's 0.01 within its cap (registry.AUTO_CAPPED)
    eps: float = EPS(1e-4)
    tau: int = TAU(10)
    m: int = WINDOW(20)
    budget: int = BUDGET(50)
    #: the total call cap N of acurank-auto-N (from the method's name, not an option)
    cap: int | None = Option(domain=at_least(1), flag="acurank-auto-N", cli=False)(None)
    init: Init = INIT(Init.score)
    sigma: str = SIGMA("mu/3")
    updater: Updater = UPDATER(Updater.fast)
    beta_grid: str = Option("beta_grid", str, "acurank-auto's noise models: performance noise beta as multiples of the "
                            "median initial sigma, comma-separated (fractions allowed), the first choice before any "
                            "evidence marked * (none marked: the first)", flag="--beta-grid")("1/16,1/8,*1/4,1,4")
    beta_pool: Pool = Option("beta_pool", Pool, "acurank-auto learns beta from the answers of the whole run (run; every "
                             "query advances in step, so all are in memory at once) or of each query alone (query: memory bounded by "
                             "the batch)", flag="--beta-pool")(Pool.run)
    outcome: Outcome = OUTCOME(Outcome.order)

    def __post_init__(self) -> None:
        self.check_shared()
        object.__setattr__(self, "beta_grid", str(self.beta_grid).replace(" ", ""))
        object.__setattr__(self, "_grid", beta_grid(self.beta_grid))  # parsed once (not a field: not in asdict)

    @property
    def factors(self) -> tuple[float, ...]:
        return self._grid[0]

    @property
    def start(self) -> int:
        return self._grid[1]
