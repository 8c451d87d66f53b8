"""The built-in method families, registered exactly as a plug-in registers its own: one
:func:`~acurank_cli.method.registry.register_method` call each (this module is the first that
:data:`~acurank_cli.method.registry.METHODS` imports). Each builder takes the name's match and the options given
and imports its strategy module when called, so listing methods (the CLI's help) loads no numpy."""

from __future__ import annotations

import re
from typing import Any

from ..errors import InputError, OptionError
from .baselines import SlidingWindows, TourRank, TrueSkillStatic
from .blitz import BlitzRank
from .acurank_params import AcuRankParams, AutoParams
from .registry import MethodSpec, register_method


def count(name: str, value: str, what: str) -> int:
    """A count in a method name (acurank-N, sw-x, tourrank-x, ts-c1-...): at least 1."""
    if int(value) < 1:
        raise InputError(f"method {name!r}: {what} must be at least 1, got {int(value)}")
    return int(value)


#: AcuRank variants: (eps, tau) per the paper; all with the implementation's cap of B = 100 groups.
ACURANK_VARIANTS: dict[str, dict[str, Any]] = {
    "": {"eps": 0.01, "tau": 10},
    "h": {"eps": 1e-4, "tau": 10},
    "hh": {"eps": 1e-4, "tau": 5},
}


def _acurank_spelling(match: re.Match) -> str:
    """acurank-H, acurank-HH as the paper writes them; the rest lower case (ACURANK-h-9 -> acurank-H-9)."""
    name = match.group(0).lower()
    variant = match.group("variant")
    return name.replace(f"-{variant.lower()}", f"-{variant.upper()}", 1) if variant else name


def _acurank(match: re.Match, opts: dict[str, Any]):
    from .acurank import AcuRank

    name = match.group(0)
    if opts.get("budget_wave") is not None and opts.get("budget_total") is None:
        raise OptionError("{budget_wave} needs {budget_total} (the wave is how a query-set budget is spent)",
                          budget_wave="--budget-wave", budget_total="--budget-total")
    values = {**ACURANK_VARIANTS[(match.group("variant") or "").lower()], **opts}
    if match.group("cap"):
        _capped(name, opts)
        values["cap"] = count(name, match.group("cap"), "the call cap N")
    if match.group("rounds"):
        values["max_rounds"] = count(name, match.group("rounds"), "the round cap R")
    return AcuRank(name, AcuRankParams(**values))


def _capped(name: str, opts: dict[str, Any]) -> None:
    """A call cap N (acurank-N, acurank-auto-N) spends what is left of N after the first pass: a budget B given with
    it would be dropped in silence (it was), so it is refused."""
    if opts.get("budget") is not None:
        raise OptionError(f"method {name!r} caps its calls at the N of its name, which sets its budget: {{budget}} "
                          "is for a method without a cap (acurank, acurank-H, acurank-auto); drop it, or give one of "
                          "those", budget="--budget")


def _acurank_sets(match: re.Match) -> frozenset:
    """What an acurank name sets: its variant's eps and tau where they differ from acurank's (-H: eps; -HH: both)."""
    variant = ACURANK_VARIANTS[(match.group("variant") or "").lower()]
    return frozenset(k for k, v in variant.items() if v != ACURANK_VARIANTS[""][k])


#: acurank-auto-N's defaults where they differ from acurank-auto's (AutoParams): within a call cap, acurank's eps.
AUTO_CAPPED: dict[str, Any] = {"eps": 0.01}


def _auto(match: re.Match, opts: dict[str, Any]):
    from .auto import AcuRankAuto

    values = dict(opts)
    if match.group("cap"):
        _capped(match.group(0), opts)
        values = {**AUTO_CAPPED, **values, "cap": count(match.group(0), match.group("cap"), "the call cap N")}
    return AcuRankAuto(match.group(0), AutoParams(**values))


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


register_method(MethodSpec(r"acurank(?:-(?P<variant>HH|H))?(?:-(?P<cap>\d+)|-r(?P<rounds>\d+))?", _acurank, False,
                           "acurank, acurank-H, acurank-HH, acurank-9 (at most 9 calls), acurank-r3 (at most 3 "
                           "rounds)", AcuRankParams, name="acurank",
                           variant_defaults={"eps": "acurank-H, -HH: 0.0001", "tau": "acurank-HH: 5"},
                           spelling=_acurank_spelling, sets=_acurank_sets))
register_method(MethodSpec(r"acurank-auto(?:-(?P<cap>\d+))?", _auto, False,
                           "acurank-auto (learns the reranker's noise), acurank-auto-9 (at most 9 calls)", AutoParams,
                           name="acurank-auto", variant_defaults={"eps": "acurank-auto-N: 0.01"},
                           sets=lambda match: frozenset(AUTO_CAPPED) if match.group("cap") else frozenset()))
register_method(MethodSpec(r"sw-(?P<passes>\d+)", _sw, True, "sw-1, sw-2, sw-3", SlidingWindows, name="sw-x"))
register_method(MethodSpec(r"tourrank-(?P<tournaments>\d+)", _tourrank, True, "tourrank-1, tourrank-2", TourRank,
                           name="tourrank-x"))
register_method(MethodSpec(r"ts-(?P<stages>\d+(?:-\d+)*)", _ts, True, "ts-5-2-2-1", TrueSkillStatic, name="ts-c1-..."))
register_method(MethodSpec(r"blitz-k(?P<window>\d+)", _blitz, True, "blitz-k20, blitz-k10", BlitzRank, name="blitz-kW"))
