"""Method registry: a method name (acurank-H, sw-2, tourrank-1, ts-5-2-2-1, ...) -> a strategy."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError
from .acurank import AcuRank, AcuRankParams, Partition, StopRule
from .base import Strategy
from .baselines import SlidingWindows, TourRank, TrueSkillStatic

#: AcuRank variants: (eps, tau) per the paper; all with the implementation's cap of B = 100 groups.
ACURANK_VARIANTS: dict[str, dict[str, Any]] = {
    "acurank": {"eps": 0.01, "tau": 10},
    "acurank-h": {"eps": 1e-4, "tau": 10},
    "acurank-hh": {"eps": 1e-4, "tau": 5},
}


def _acurank(match: re.Match, opts: dict[str, Any]) -> Strategy:
    name = match.group(0)
    base = ACURANK_VARIANTS[re.sub(r"-r?\d+$", "", name.lower())]  # the pattern admits only these variants
    fields = {f.name for f in dataclasses.fields(AcuRankParams)}
    values = {**base, **{k: v for k, v in opts.items() if k in fields and v is not None}}
    if match.group("cap"):
        values["cap"] = int(match.group("cap"))
    if match.group("rounds"):
        values["max_rounds"] = int(match.group("rounds"))
    return AcuRank(name, AcuRankParams(**values))


def _sw(match: re.Match, opts: dict[str, Any]) -> Strategy:
    m = opts.get("m") or 20
    return SlidingWindows(match.group(0), int(match.group(1)), m=m, stride=max(1, m // 2))


def _tourrank(match: re.Match, opts: dict[str, Any]) -> Strategy:
    return TourRank(match.group(0), int(match.group(1)), seed=opts.get("seed") or 0)


def _ts(match: re.Match, opts: dict[str, Any]) -> Strategy:
    stages = tuple(int(x) for x in match.group(1).split("-"))
    extra = {k: opts[k] for k in ("m", "init", "updater") if opts.get(k) is not None}
    return TrueSkillStatic(match.group(0), stages, **extra)


@dataclass(frozen=True)
class MethodSpec:
    """A method family: its name pattern, how to build it, whether it is a baseline."""

    pattern: str
    build: Callable[[re.Match, dict[str, Any]], Strategy]
    baseline: bool
    example: str


METHODS: tuple[MethodSpec, ...] = (
    MethodSpec(r"acurank(?:-(?:H|HH|h|hh))?(?:-(?P<cap>\d+)|-r(?P<rounds>\d+))?", _acurank, False,
               "acurank, acurank-H, acurank-HH, acurank-9 (at most 9 calls), acurank-r3 (at most 3 rounds)"),
    MethodSpec(r"sw-(\d+)", _sw, True, "sw-1, sw-2, sw-3"),
    MethodSpec(r"tourrank-(\d+)", _tourrank, True, "tourrank-1, tourrank-2"),
    MethodSpec(r"ts-(\d+(?:-\d+)*)", _ts, True, "ts-5-2-2-1"),
)


def known_methods(baseline_only: bool = False) -> str:
    """Human-readable list of method names, for help and errors."""
    return "; ".join(s.example for s in METHODS if s.baseline or not baseline_only)


def build_strategy(name: str, baseline_only: bool = False, **opts: Any) -> Strategy:
    """Build the strategy for a method name; options not given (None) keep the variant defaults."""
    for spec in METHODS:
        match = re.fullmatch(spec.pattern, name)
        if match and (spec.baseline or not baseline_only):
            return spec.build(match, opts)
    raise InputError(f"unknown method {name!r}; known: {known_methods(baseline_only)}")


__all__ = ["AcuRank", "AcuRankParams", "Partition", "StopRule", "Strategy", "build_strategy", "known_methods"]
