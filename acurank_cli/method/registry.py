"""Method registry: a method name (acurank-H, sw-2, tourrank-1, ts-5-2-2-1, ...) -> a strategy.

Each family is one :class:`MethodSpec`: a name pattern (its named groups are the counts the name
carries), a builder that takes the match and the typed :class:`MethodOptions`, and the options it uses;
any other option given is an error (:class:`UnusedOption`). Builders import their strategy module when
called, so listing the methods (the CLI's help) loads no numpy. A new method is one module and one
``METHODS`` entry.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError
from .params import AcuRankParams


@dataclass(frozen=True)
class MethodOptions:
    """Every option a method may take, by keyword (None: not given, the method's default holds). The
    CLI's flags and the API's keywords both land here."""

    k: int | None = None
    eps: float | None = None
    tau: int | None = None
    m: int | None = None
    budget: int | None = None
    max_rounds: int | None = None
    init: Any = None
    partition: Any = None
    stop: Any = None
    seed: int | None = None
    updater: Any = None
    uncertainty: Any = None
    sigma: str | None = None
    budget_total: str | None = None
    budget_wave: int | None = None

    def given(self) -> dict[str, Any]:
        """The options that were given (not None)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


#: The keyword names of method options.
OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(MethodOptions))

#: The keyword -> flag names of method options where they differ from ``--name``.
FLAGS = {"m": "--window", "max_rounds": "--max-rounds", "budget_total": "--budget-total",
         "budget_wave": "--budget-wave"}


class UnusedOption(InputError):
    """An option the method does not use (the API names keywords, the CLI flags)."""

    def __init__(self, method: str, given: list[str], takes: frozenset[str]):
        self.method, self.given, self.takes = method, given, takes
        super().__init__(self._text(lambda k: k))

    def _text(self, name) -> str:
        takes = ", ".join(name(k) for k in sorted(self.takes)) or "none"
        return (f"method {self.method!r} does not use {', '.join(name(k) for k in self.given)} "
                f"(its options: {takes})")

    def cli(self) -> str:
        return self._text(lambda k: FLAGS.get(k, "--" + k.replace("_", "-")))


def count(name: str, value: str, what: str) -> int:
    """A count in a method name (acurank-N, sw-x, tourrank-x, ts-c1-...): at least 1."""
    if int(value) < 1:
        raise InputError(f"method {name!r}: {what} must be at least 1, got {int(value)}")
    return int(value)


# -- builders: (the name's match, the options given) -> a strategy ------------------------------------

#: AcuRank variants: (eps, tau) per the paper; all with the implementation's cap of B = 100 groups.
ACURANK_VARIANTS: dict[str, dict[str, Any]] = {
    "": {"eps": 0.01, "tau": 10},
    "h": {"eps": 1e-4, "tau": 10},
    "hh": {"eps": 1e-4, "tau": 5},
}


def _acurank(match: re.Match, opts: dict[str, Any]):
    from .acurank import AcuRank

    name = match.group(0)
    if opts.get("budget_wave") is not None and opts.get("budget_total") is None:
        raise InputError("--budget-wave needs --budget-total (the wave is how a query-set budget is spent)")
    values = {**ACURANK_VARIANTS[(match.group("variant") or "").lower()], **opts}
    if match.group("cap"):
        values["cap"] = count(name, match.group("cap"), "the call cap N")
    if match.group("rounds"):
        values["max_rounds"] = count(name, match.group("rounds"), "the round cap R")
    return AcuRank(name, AcuRankParams(**values))


def _sw(match: re.Match, opts: dict[str, Any]):
    from .baselines import SlidingWindows

    m = opts.get("m", 20)
    passes = count(match.group(0), match.group("passes"), "the number of passes")
    return SlidingWindows(match.group(0), passes, m=m, stride=max(1, m // 2) if isinstance(m, int) else m)


def _tourrank(match: re.Match, opts: dict[str, Any]):
    from .baselines import TourRank

    return TourRank(match.group(0), count(match.group(0), match.group("tournaments"), "the number of tournaments"),
                    **opts)


def _ts(match: re.Match, opts: dict[str, Any]):
    from .baselines import TrueSkillStatic

    stages = tuple(count(match.group(0), x, "every stage's window count c_j") for x in match.group("stages").split("-"))
    return TrueSkillStatic(match.group(0), stages, **opts)


def _blitz(match: re.Match, opts: dict[str, Any]):
    from .blitz import BlitzRank

    name = match.group(0)
    if int(match.group("window")) < 2:
        raise InputError(f"method {name!r}: the window must be at least 2 documents, got {int(match.group('window'))}")
    return BlitzRank(name, int(match.group("window")), **opts)


@dataclass(frozen=True)
class MethodSpec:
    """A method family: its name pattern, how to build it, whether it is a baseline, the options it uses."""

    pattern: str
    build: Callable[[re.Match, dict[str, Any]], Any]
    baseline: bool
    example: str
    #: the options (keyword names of MethodOptions) the method uses; any other given option is an error
    options: frozenset[str] = frozenset()


ACURANK_OPTIONS = OPTION_NAMES

METHODS: list[MethodSpec] = [
    MethodSpec(r"acurank(?:-(?P<variant>H|HH|h|hh))?(?:-(?P<cap>\d+)|-r(?P<rounds>\d+))?", _acurank, False,
               "acurank, acurank-H, acurank-HH, acurank-9 (at most 9 calls), acurank-r3 (at most 3 rounds)",
               ACURANK_OPTIONS),
    MethodSpec(r"sw-(?P<passes>\d+)", _sw, True, "sw-1, sw-2, sw-3", frozenset({"m"})),
    MethodSpec(r"tourrank-(?P<tournaments>\d+)", _tourrank, True, "tourrank-1, tourrank-2", frozenset({"seed"})),
    MethodSpec(r"ts-(?P<stages>\d+(?:-\d+)*)", _ts, True, "ts-5-2-2-1", frozenset({"m", "init", "updater"})),
    MethodSpec(r"blitz-k(?P<window>\d+)", _blitz, True, "blitz-k20, blitz-k10", frozenset({"k", "max_rounds"})),
]


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add a method family (a plug-in's one registry line); a later family does not shadow an earlier one."""
    METHODS.append(spec)
    return spec


def known_methods(baseline_only: bool = False) -> str:
    """Human-readable list of method names, for help and errors."""
    return "; ".join(s.example for s in METHODS if s.baseline or not baseline_only)


def _spec(name: str) -> tuple[MethodSpec, re.Match] | None:
    for spec in METHODS:
        match = re.fullmatch(spec.pattern, name)
        if match:
            return spec, match
    return None


def method_options(name: str) -> frozenset[str]:
    """The options (keyword names) the method ``name`` uses (none for an unknown name)."""
    found = _spec(name)
    return found[0].options if found else frozenset()


def build_strategy(name: str, options: MethodOptions | None = None, baseline_only: bool = False, **opts: Any):
    """Build the strategy for a method name; options not given (None) keep the variant defaults; an
    option the method does not use is an error (:class:`UnusedOption`), as is a value outside its domain.
    Options come as a :class:`MethodOptions` record or as keywords (its field names)."""
    unknown = sorted(k for k, v in opts.items() if k not in OPTION_NAMES and v is not None)
    known = {k: v for k, v in opts.items() if k in OPTION_NAMES}
    if known:
        options = dataclasses.replace(options or MethodOptions(), **known)
    given = (options or MethodOptions()).given()
    found = _spec(name)
    if found and (found[0].baseline or not baseline_only):
        spec, match = found
        unused = sorted(k for k in given if k not in spec.options) + unknown
        if unused:
            raise UnusedOption(name, unused, spec.options)
        return spec.build(match, given)
    raise InputError(f"unknown method {name!r}; known: {known_methods(baseline_only)}")
