"""Method registry: a method name (acurank-H, acurank-auto-9, sw-2, tourrank-1, ts-5-2-2-1, blitz-k20, ...)
-> a strategy.

Each family registers once as a :class:`MethodSpec`: a name pattern (its named groups are the counts the
name carries), a builder that takes the match and the options given, and its parameters record, whose
option fields (:mod:`acurank_cli.method.options`) are the family's options. From those records come the
``rerank``/``baseline`` flags (:func:`cli_options`), the API's keywords (:func:`option_names`), the defaults
that help shows, and the error for an option the method does not use (:class:`UnusedOption`). Builders
import their strategy module when called, so listing methods (the CLI's help) loads no numpy.

A new method is one module with one :func:`register_method` line; a module outside the package is found
through the ``acurank.methods`` entry-point group or the ``ACURANK_METHODS`` environment variable
(comma-separated module names), as backends are.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import InputError, OptionError
from ..params import check_domains, flag_of
from ..plugins import PluginModules
from .baselines import SlidingWindows, TourRank, TrueSkillStatic
from .blitz import BlitzRank
from .options import Option, declaration, option_fields
from .params import AcuRankParams, AutoParams


@dataclass(frozen=True)
class MethodSpec:
    """A method family: its name pattern, how to build it, whether it is a baseline, an example of its names,
    its parameters record (the option fields are its options) and, for help, defaults that its name variants
    change (``{"eps": "acurank-H, -HH: 1e-4"}``)."""

    pattern: str
    build: Callable[[re.Match, dict[str, Any]], Any]
    baseline: bool
    example: str
    params: type
    #: the family's name in help (``sw-x``); default: the first example
    name: str | None = None
    variant_defaults: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: the name as the family spells it, from a match of any case (one rule for case: names match whatever their
    #: case, and the run, its tag and its stats carry this spelling); default: lower case
    spelling: Callable[[re.Match], str] = lambda match: match.group(0).lower()

    @property
    def options(self) -> dict[str, dataclasses.Field]:
        """Option name -> its field in this family's record (which carries the family's default)."""
        return {f.name: f for f in option_fields(self.params)}

    @property
    def family(self) -> str:
        return self.name or self.example.split(",")[0].split(" ")[0]


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
        flags = {name: o.decl.cli_flag for name, o in cli_options().items()}
        return self._text(lambda k: flags.get(k, flag_of(k)))


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
        values["cap"] = count(name, match.group("cap"), "the call cap N")
    if match.group("rounds"):
        values["max_rounds"] = count(name, match.group("rounds"), "the round cap R")
    return AcuRank(name, AcuRankParams(**values))


#: acurank-auto-N's defaults where they differ from acurank-auto's (AutoParams): within a call cap, acurank's eps.
AUTO_CAPPED: dict[str, Any] = {"eps": 0.01}


def _auto(match: re.Match, opts: dict[str, Any]):
    from .auto import AcuRankAuto

    values = dict(opts)
    if match.group("cap"):
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


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[MethodSpec, ...]:
    return (
        MethodSpec(r"acurank(?:-(?P<variant>HH|H))?(?:-(?P<cap>\d+)|-r(?P<rounds>\d+))?", _acurank, False,
                   "acurank, acurank-H, acurank-HH, acurank-9 (at most 9 calls), acurank-r3 (at most 3 rounds)",
                   AcuRankParams, "acurank", {"eps": "acurank-H, -HH: 0.0001", "tau": "acurank-HH: 5"},
                   _acurank_spelling),
        MethodSpec(r"acurank-auto(?:-(?P<cap>\d+))?", _auto, False,
                   "acurank-auto (learns the reranker's noise), acurank-auto-9 (at most 9 calls)", AutoParams,
                   "acurank-auto", {"eps": "acurank-auto-N: 0.01"}),
        MethodSpec(r"sw-(?P<passes>\d+)", _sw, True, "sw-1, sw-2, sw-3", SlidingWindows, "sw-x"),
        MethodSpec(r"tourrank-(?P<tournaments>\d+)", _tourrank, True, "tourrank-1, tourrank-2", TourRank, "tourrank-x"),
        MethodSpec(r"ts-(?P<stages>\d+(?:-\d+)*)", _ts, True, "ts-5-2-2-1", TrueSkillStatic, "ts-c1-..."),
        MethodSpec(r"blitz-k(?P<window>\d+)", _blitz, True, "blitz-k20, blitz-k10", BlitzRank, "blitz-kW"),
    )


#: Families registered by plug-ins (and by tests), after the built-in ones.
EXTRA: list[MethodSpec] = []


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add a method family (a plug-in's one registry line); a later family does not shadow an earlier one."""
    EXTRA.append(spec)
    cli_options.cache_clear()
    return spec


def methods() -> list[MethodSpec]:
    """Every registered family: the built-ins, then plug-ins (modules named by the ``acurank.methods`` entry
    points and ``ACURANK_METHODS``, imported on first use)."""
    load_plugins()
    return [*_builtin(), *EXTRA]


#: Where plug-in methods come from (see :mod:`acurank_cli.plugins`); the built-ins are :func:`_builtin`'s.
PLUGINS = PluginModules("method", "acurank.methods", "ACURANK_METHODS")


def load_plugins() -> None:
    """Import the plug-in method modules (each registers its families once, at import)."""
    PLUGINS.load()


def known_methods(baseline_only: bool = False) -> str:
    """Human-readable list of method names, for help and errors."""
    return "; ".join(s.example for s in methods() if s.baseline or not baseline_only)


def _spec(name: str) -> tuple[MethodSpec, re.Match] | None:
    """The family of a method name, whatever its case, and the match of its spelling (``match.group(0)``)."""
    for spec in methods():
        match = re.fullmatch(spec.pattern, name, re.IGNORECASE)
        if match:
            return spec, re.fullmatch(spec.pattern, spec.spelling(match), re.IGNORECASE) or match
    return None


def method_options(name: str) -> frozenset[str]:
    """The options (keyword names) the method ``name`` uses (none for an unknown name)."""
    found = _spec(name)
    return frozenset(found[0].options) if found else frozenset()


def option_names() -> frozenset[str]:
    """Every option any registered method takes (the API's method keywords)."""
    return frozenset(cli_options())


@dataclass(frozen=True)
class MethodOption:
    """One method flag: its declaration and, per family that takes it, that family's default."""

    decl: Option
    defaults: tuple[tuple[MethodSpec, Any], ...]

    def help(self, baseline_only: bool = False) -> str:
        """The declaration's help, the families that take it and their defaults."""
        shown = [(s, d) for s, d in self.defaults if s.baseline or not baseline_only]
        values = {_shown(d) for _, d in shown}
        if len(values) == 1:
            default = f"default {values.pop()}"
        else:
            default = "default " + ", ".join(f"{s.family} {_shown(d)}" for s, d in shown)
        notes = [s.variant_defaults[self.decl.name] for s, _ in shown if self.decl.name in s.variant_defaults]
        families = ", ".join(s.family for s, _ in shown)
        return f"{families}: {self.decl.help} ({default}{'; ' + '; '.join(notes) if notes else ''})."

    def applies(self, baseline_only: bool) -> bool:
        return any(s.baseline or not baseline_only for s, _ in self.defaults)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    return str(getattr(value, "value", value))


@functools.lru_cache(maxsize=1)
def cli_options() -> dict[str, MethodOption]:
    """Every registered family's options, name -> :class:`MethodOption`. Two families that take an option of
    the same name must share its declaration (:mod:`acurank_cli.method.options`), or one flag would mean two
    things."""
    out: dict[str, MethodOption] = {}
    for spec in methods():
        for name, f in spec.options.items():
            decl = declaration(f)
            seen = out.get(name)
            if seen is not None and seen.decl != decl:
                raise InputError(f"method {spec.family!r} declares option {name!r} differently from "
                                 f"{', '.join(s.family for s, _ in seen.defaults)}: share one declaration "
                                 "(acurank_cli/method/options.py)")
            out[name] = MethodOption(decl, (*(seen.defaults if seen else ()), (spec, f.default)))
    return out


def build_strategy(name: str, options: Mapping[str, Any] | None = None, baseline_only: bool = False, **opts: Any):
    """Build the strategy for a method name; options not given (None) keep the family's (or the variant's)
    defaults; an option the method does not use is an error (:class:`UnusedOption`), as is a value outside
    its domain. Options come as a mapping or as keywords (the option names)."""
    given = {k: v for k, v in {**(options or {}), **opts}.items() if v is not None}
    found = _spec(name)
    if found and (found[0].baseline or not baseline_only):
        spec, match = found
        unused = sorted(k for k in given if k not in spec.options)
        if unused:
            raise UnusedOption(name, unused, frozenset(spec.options))
        strategy = spec.build(match, given)
        if dataclasses.is_dataclass(strategy):  # a plug-in's record may carry its options itself
            check_domains(strategy)
        return strategy
    if found and baseline_only:
        raise InputError(f"method {name!r} is not a baseline: use 'acurank rerank --method {name}' "
                         f"(baselines: {known_methods(True)})")
    raise InputError(f"unknown method {name!r}; known: {known_methods(baseline_only)}")
