"""The method's parameters in the paper's names, with their domains, and the closed sets of choices
(rating init, updater, partition, stop rule, uncertainty rule). No numpy: the CLI reads these to build its
flags before any work starts."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ..errors import InputError
from ..params import ANY_INT, ParameterError, at_least, between, check_domains, param


class Init(str, enum.Enum):
    """How ratings start: first-stage score (mu = score, sigma = mu/3), z-scored, or uniform."""

    score = "score"
    zscore = "zscore"
    uniform = "uniform"


class Updater(str, enum.Enum):
    """Which implementation of the multiplayer TrueSkill update to use (bit-identical results)."""

    library = "library"
    fast = "fast"


class Partition(str, enum.Enum):
    """How the uncertain set C is cut into groups of m: in s_i order, or shuffled (ablation)."""

    sequential = "sequential"
    random = "random"


class StopRule(str, enum.Enum):
    """When to stop: |C| < tau (then one final pass), or top-k unchanged after an iteration."""

    uncertain = "uncertain"
    topk_stable = "topk-stable"


class Uncertainty(str, enum.Enum):
    """How AcuRank picks the uncertain set C each iteration (see :mod:`acurank_cli.method.uncertainty`)."""

    threshold = "threshold"
    exact = "exact"
    entropy = "entropy"


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


#: The enum-valued parameters, which also accept their plain string values (from a config or a script).
CHOICES: dict[str, type[enum.Enum]] = {"init": Init, "partition": Partition, "stop": StopRule, "updater": Updater,
                                       "uncertainty": Uncertainty}


def coerce_choices(record: object) -> None:
    """Turn the plain strings of a frozen record's enum-valued fields into their enums (or a ParameterError)."""
    for name, kind in CHOICES.items():
        if not hasattr(record, name):
            continue
        value = getattr(record, name)
        try:
            object.__setattr__(record, name, kind(value))
        except ValueError:
            raise ParameterError(name, value, "one of " + ", ".join(v.value for v in kind)) from None


@dataclass(frozen=True)
class AcuRankParams:
    """Parameters in the paper's names: cutoff k, tolerance eps, stop threshold tau, window m,
    adaptive-group budget B (``budget``) or total call cap N (``cap``, acurank-N)."""

    k: int = param(10, at_least(1))
    #: eps < 1/2, or {eps < s_i < 1 - eps} is empty
    eps: float = param(0.01, between(0.0, 0.5, lo_open=True, hi_open=True))
    tau: int = param(10, at_least(0))  # 0: never stop on |C| < tau (only when C is empty or B is spent)
    #: a window of one document is never sent: m >= 2
    m: int = param(20, at_least(2), flag="--window")
    budget: int = param(100, at_least(0))
    cap: int | None = param(None, at_least(1), flag="acurank-N")
    init: Init = Init.score
    partition: Partition = Partition.sequential
    stop: StopRule = StopRule.uncertain
    seed: int = param(0, ANY_INT)
    updater: Updater = Updater.fast
    #: Round cap R (--max-rounds): the initial pass is round 1, each adaptive iteration one round; the
    #: last allowed round is a final pass over {s_i > eps}, as when |C| < tau. None: no cap.
    max_rounds: int | None = param(None, at_least(1))
    #: Which documents are uncertain (--uncertainty): threshold (the paper's s_i), exact (p_i = P(r_i <= k))
    #: or entropy (of the rank distribution truncated at k); see acurank_cli/method/uncertainty.py.
    uncertainty: Uncertainty = Uncertainty.threshold
    #: Initial sigma (--sigma): mu/3 (the paper), mu/2, or fixed:V (the supplementary variance ablation)
    sigma: str = param("mu/3", flag="--sigma")
    #: A query-set budget (--budget-total 9x | 900): None, every budget is per query; see run/allocation.py
    budget_total: str | None = param(None, flag="--budget-total")
    #: Optional iterations granted per allocation wave under a query-set budget (--budget-wave)
    budget_wave: int = param(8, at_least(1), flag="--budget-wave")

    def __post_init__(self) -> None:
        """Check every parameter's domain; accept plain strings for the enum-valued ones."""
        check_domains(self)
        coerce_choices(self)
        sigma_rule(self.sigma)
        if self.budget_total is not None:
            object.__setattr__(self, "budget_total", str(self.budget_total).strip())
            set_budget(self.budget_total)

    @property
    def set_budget(self) -> SetBudget | None:
        """The query-set budget, if any."""
        return None if self.budget_total is None else set_budget(self.budget_total, self.budget_wave)

    def initial_calls(self, n: int) -> int:
        """Windows of the initial pass over n candidates: ceil(n / m)."""
        return math.ceil(n / self.m)

    def check_task(self, n: int, qid: str) -> None:
        """acurank-N promises at most N calls: N must cover the initial pass over n candidates."""
        first = self.initial_calls(n)
        if self.cap is not None and self.cap < first:
            raise InputError(f"acurank-{self.cap}: query {qid} has {n} candidates, whose initial pass alone takes "
                             f"{first} calls of m = {self.m}; use acurank-N with N >= {first} or a smaller --depth")
