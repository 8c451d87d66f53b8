"""Method registry: a method name (acurank-H, sw-2, tourrank-1, ts-5-2-2-1, ...) -> a strategy."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError
from .acurank import AcuRank, AcuRankParams, Partition, StopRule
from .base import Strategy, check_tasks
from .baselines import SlidingWindows, TourRank, TrueSkillStatic

#: AcuRank variants: (eps, tau) per the paper; all with the implementation's cap of B = 100 groups.
ACURANK_VARIANTS: dict[str, dict[str, Any]] = {
    "acurank": {"eps": 0.01, "tau": 10},
    "acurank-h": {"eps": 1e-4, "tau": 10},
    "acurank-hh": {"eps": 1e-4, "tau": 5},
}


def _count(name: str, value: str, what: str) -> int:
    """A count in a method name (acurank-N, sw-x, tourrank-x, ts-c1-...): at least 1."""
    if int(value) < 1:
        raise InputError(f"method {name!r}: {what} must be at least 1, got {int(value)}")
    return int(value)


def _acurank(match: re.Match, opts: dict[str, Any]) -> Strategy:
    name = match.group(0)
    base = ACURANK_VARIANTS[re.sub(r"-r?\d+$", "", name.lower())]  # the pattern admits only these variants
    values = {**base, **opts}
    if match.group("cap"):
        values["cap"] = _count(name, match.group("cap"), "the call cap N")
    if match.group("rounds"):
        values["max_rounds"] = _count(name, match.group("rounds"), "the round cap R")
    return AcuRank(name, AcuRankParams(**values))


def _sw(match: re.Match, opts: dict[str, Any]) -> Strategy:
    m = opts.get("m", 20)
    passes = _count(match.group(0), match.group(1), "the number of passes")
    return SlidingWindows(match.group(0), passes, m=m, stride=max(1, m // 2) if isinstance(m, int) else m)


def _tourrank(match: re.Match, opts: dict[str, Any]) -> Strategy:
    return TourRank(match.group(0), _count(match.group(0), match.group(1), "the number of tournaments"), **opts)


def _ts(match: re.Match, opts: dict[str, Any]) -> Strategy:
    stages = tuple(_count(match.group(0), x, "every stage's window count c_j") for x in match.group(1).split("-"))
    return TrueSkillStatic(match.group(0), stages, **opts)


#: The keyword -> flag names of method options where they differ from ``--name``.
FLAGS = {"m": "--window", "max_rounds": "--max-rounds"}


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


@dataclass(frozen=True)
class MethodSpec:
    """A method family: its name pattern, how to build it, whether it is a baseline."""

    pattern: str
    build: Callable[[re.Match, dict[str, Any]], Strategy]
    baseline: bool
    example: str
    #: the options (keyword names) the method uses; any other given option is an error
    options: frozenset[str] = frozenset()


ACURANK_OPTIONS = frozenset(f.name for f in dataclasses.fields(AcuRankParams)) - {"cap"}

METHODS: tuple[MethodSpec, ...] = (
    MethodSpec(r"acurank(?:-(?:H|HH|h|hh))?(?:-(?P<cap>\d+)|-r(?P<rounds>\d+))?", _acurank, False,
               "acurank, acurank-H, acurank-HH, acurank-9 (at most 9 calls), acurank-r3 (at most 3 rounds)",
               ACURANK_OPTIONS),
    MethodSpec(r"sw-(\d+)", _sw, True, "sw-1, sw-2, sw-3", frozenset({"m"})),
    MethodSpec(r"tourrank-(\d+)", _tourrank, True, "tourrank-1, tourrank-2", frozenset({"seed"})),
    MethodSpec(r"ts-(\d+(?:-\d+)*)", _ts, True, "ts-5-2-2-1", frozenset({"m", "init", "updater"})),
)


def known_methods(baseline_only: bool = False) -> str:
    """Human-readable list of method names, for help and errors."""
    return "; ".join(s.example for s in METHODS if s.baseline or not baseline_only)


def method_options(name: str) -> frozenset[str]:
    """The options (keyword names) the method ``name`` uses (none for an unknown name)."""
    for spec in METHODS:
        if re.fullmatch(spec.pattern, name):
            return spec.options
    return frozenset()


def build_strategy(name: str, baseline_only: bool = False, **opts: Any) -> Strategy:
    """Build the strategy for a method name; options not given (None) keep the variant defaults; an
    option the method does not use is an error (:class:`UnusedOption`), as is a value outside its domain."""
    for spec in METHODS:
        match = re.fullmatch(spec.pattern, name)
        if match and (spec.baseline or not baseline_only):
            given = {k: v for k, v in opts.items() if v is not None}
            unused = sorted(k for k in given if k not in spec.options)
            if unused:
                raise UnusedOption(name, unused, spec.options)
            return spec.build(match, given)
    raise InputError(f"unknown method {name!r}; known: {known_methods(baseline_only)}")


__all__ = ["AcuRank", "AcuRankParams", "Partition", "StopRule", "Strategy", "UnusedOption", "build_strategy",
           "check_tasks", "known_methods", "method_options"]
