"""Method registry: a method name (acurank-H, acurank-auto-9, sw-2, tourrank-1, ts-5-2-2-1, blitz-k20, ...)
-> a strategy.

Each family registers once as a :class:`MethodSpec`: a name pattern (its named groups are the counts the
name carries), a builder that takes the match and the options given, and its parameters record, whose
option fields (:mod:`acurank_cli.method.shared_options`) are the family's options. The families are entries of
:data:`METHODS`, a :class:`~acurank_cli.plugins.Registry` as the backends' is: from its options table come the
``rerank``/``baseline`` flags, the API's keywords (:func:`option_names`), the defaults that help shows
(:func:`option_help`), and the error for an option the method does not use
(:class:`~acurank_cli.params.NotAnOption`).

A new method is one module with one :func:`register_method` line, the built-ins' included
(:mod:`acurank_cli.method.families`); a module outside the package is found through the ``acurank.methods``
entry-point group or the ``ACURANK_METHODS`` environment variable (comma-separated module names), as backends
are.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import InputError
from ..params import NotAnOption, check_domains
from ..plugins import Declared, PluginModules, Registry, declared_options


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
    _: dataclasses.KW_ONLY
    #: the family's name in help (``sw-x``); default: the first example
    name: str | None = None
    variant_defaults: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: the name as the family spells it, from a match of any case (one rule for case: names match whatever their
    #: case, and the run, its tag and its stats carry this spelling); default: lower case
    spelling: Callable[[re.Match], str] = lambda match: match.group(0).lower()
    #: the options a name of the family sets by itself (``acurank-H``: eps), which a session's own options do not
    #: override for a call naming it (:func:`carried`); default: none
    sets: Callable[[re.Match], frozenset] = lambda match: frozenset()

    @property
    def record(self) -> type:
        """The record whose option fields are this family's options (its registry entry's record)."""
        return self.params

    @property
    def options(self) -> dict[str, dataclasses.Field]:
        """Option name -> its field in this family's record (which carries the family's default)."""
        return {decl.name: f for f, decl in declared_options(self.params)}

    @property
    def family(self) -> str:
        return self.name or self.example.split(",")[0].split(" ")[0]


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    return str(getattr(value, "value", value))


def option_help(option: Declared, baseline_only: bool = False) -> str:
    """A method option's help: its declaration's, the families that take it and their defaults."""
    shown = [(s, d) for s, d in option.owners if s.baseline or not baseline_only]
    values = {_shown(d) for _, d in shown}
    if len(values) == 1:
        default = f"default {values.pop()}"
    else:
        default = "default " + ", ".join(f"{s.family} {_shown(d)}" for s, d in shown)
    notes = [s.variant_defaults[option.decl.name] for s, _ in shown if option.decl.name in s.variant_defaults]
    families = ", ".join(s.family for s, _ in shown)
    return f"{families}: {option.decl.help} ({default}{'; ' + '; '.join(notes) if notes else ''})."


def applies(option: Declared, baseline_only: bool) -> bool:
    """Whether ``baseline`` shows the option (a family that takes it is a baseline); it reads every option, so
    that one a baseline does not use is refused as ``rerank`` refuses it, not as a flag that does not exist."""
    return any(s.baseline or not baseline_only for s, _ in option.owners)


#: The method families: the built-ins (:mod:`acurank_cli.method.families`), then plug-ins (modules named by the
#: ``acurank.methods`` entry points and ``ACURANK_METHODS``), each module's families registered at its import.
METHODS: Registry[MethodSpec] = Registry(
    "method", PluginModules("method", "acurank.methods", "ACURANK_METHODS", (f"{__package__}.families",)),
    "acurank_cli/method/shared_options.py", option_help, applies)


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add a method family (the one registration line of a built-in and a plug-in alike); a later family does not
    shadow an earlier one whose pattern also matches a name."""
    return METHODS.register(spec.family, spec)


def methods(strict: bool = True) -> list[MethodSpec]:
    """Every registered family: the built-ins, then plug-ins (imported on first use; ``strict=False`` skips a
    plug-in that fails to import, which the command that uses a method then reports in one line)."""
    return list(METHODS.load(strict).values())


def known_methods(baseline_only: bool = False) -> str:
    """Human-readable list of method names, for help and errors (a plug-in that fails to import is left out here,
    as the flags leave out a backend's: the command that resolves a method says it)."""
    return "; ".join(s.example for s in methods(strict=False) if s.baseline or not baseline_only)


def _spec(name: str) -> tuple[MethodSpec, re.Match] | None:
    """The family of a method name, whatever its case, and the match of its spelling (``match.group(0)``)."""
    for spec in methods():
        match = re.fullmatch(spec.pattern, name, re.IGNORECASE)
        if match:
            return spec, re.fullmatch(spec.pattern, spec.spelling(match), re.IGNORECASE) or match
    return None


def spelled(name: str) -> str:
    """A method name as its family spells it, whatever case it came in (``AcuRank`` -> ``acurank``, the name a built
    method carries); an unknown name as given (building it says so)."""
    found = _spec(name)
    return found[1].group(0) if found else name


def carried(options: Mapping[str, Any], own: str, name: str) -> dict[str, Any]:
    """Of a session's method options (given for its method ``own``), those a call naming ``name`` takes: all where it
    names the same method; where it names another of the family (``acurank-auto-9`` on an ``acurank-auto``
    server), all but those its name sets (:attr:`MethodSpec.sets`: ``acurank-H`` keeps its eps under a server's
    ``--eps``, as its name says, where ``acurank-9`` takes it; a server's ``--beta-pool query`` is carried); none
    across families."""
    if spelled(name) == spelled(own):
        return dict(options)
    found, also = _spec(name), _spec(own)
    if found is None or also is None or found[0] is not also[0]:
        return {}
    named = found[0].sets(found[1])
    return {k: v for k, v in options.items() if k not in named}


def method_options(name: str) -> frozenset[str]:
    """The options (keyword names) the method ``name`` uses (none for an unknown name)."""
    found = _spec(name)
    return frozenset(found[0].options) if found else frozenset()


def option_names() -> frozenset[str]:
    """Every option any registered method takes (the API's method keywords)."""
    return frozenset(METHODS.table())


def build_strategy(name: str, options: Mapping[str, Any] | None = None, baseline_only: bool = False, **opts: Any):
    """Build the strategy for a method name; options not given (None) keep the family's (or the variant's)
    defaults; an option the method does not use is an error (:class:`~acurank_cli.params.NotAnOption`), as is a
    value outside
    its domain. Options come as a mapping or as keywords (the option names)."""
    given = {k: v for k, v in {**(options or {}), **opts}.items() if v is not None}
    found = _spec(name)
    if found and (found[0].baseline or not baseline_only):
        spec, match = found
        unused = sorted(k for k in given if k not in spec.options)
        if unused:
            raise NotAnOption(f"method {name!r} does not use", unused, sorted(spec.options), METHODS.flags())
        strategy = spec.build(match, given)
        if dataclasses.is_dataclass(strategy):  # a plug-in's record may carry its options itself
            check_domains(strategy)
        return strategy
    if found and baseline_only:
        raise InputError(f"method {name!r} is not a baseline: use 'acurank rerank --method {name}' "
                         f"(baselines: {known_methods(True)})")
    raise InputError(f"unknown method {name!r}; known: {known_methods(baseline_only)}")
