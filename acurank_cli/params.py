"""Parameter domains: every numeric parameter of a method or backend is declared with the values it may
take, in its typed record (``Option(domain=...)(default)``, the one declaration of methods' and backends'
options), and checked there before any model call.

A value outside its domain raises :class:`ParameterError` (an :class:`~.errors.InputError`, hence a
``ValueError``): the API shows the keyword (``k=0: must be an integer >= 1``), the CLI the flag
(``--k 0: must be an integer >= 1``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Iterable

from .errors import InputError, name_options


@dataclass(frozen=True)
class Domain:
    """The values a parameter may take: an integer or a (finite) number, between optional bounds."""

    integer: bool
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def contains(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        v = float(value)
        if not math.isfinite(v):
            return False
        if self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo):
            return False
        if self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi):
            return False
        return True

    def describe(self) -> str:
        what = "an integer" if self.integer else "a number"

        def num(x: float) -> str:
            return f"{x:g}"

        if self.lo is not None and self.hi is not None:
            return f"{what} in {'(' if self.lo_open else '['}{num(self.lo)}, {num(self.hi)}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{what} {'>' if self.lo_open else '>='} {num(self.lo)}"
        if self.hi is not None:
            return f"{what} {'<' if self.hi_open else '<='} {num(self.hi)}"
        return what


def flag_of(name: str) -> str:
    """The one spelling of a keyword as a flag: ``budget_wave`` -> ``--budget-wave``."""
    return "--" + name.replace("_", "-")


def at_least(lo: float, integer: bool = True) -> Domain:
    return Domain(integer, lo)


def positive(integer: bool = False) -> Domain:
    return Domain(integer, 0.0, lo_open=True)


def between(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> Domain:
    return Domain(False, lo, hi, lo_open, hi_open)


ANY_INT = Domain(True)


#: the command line's flag values as typed (flag -> text), set once per command (:func:`typed_values`): a message
#: quotes what was typed, not what it parsed to (``--eps 1e-400`` parses to 0.0)
_TYPED: dict[str, str] = {}


def typed_values(argv: list[str]) -> None:
    """Remember each flag's value as the command line typed it (``--flag VALUE`` or ``--flag=VALUE``)."""
    _TYPED.clear()
    for i, arg in enumerate(argv):
        if arg.startswith("-") and "=" in arg:
            flag, _, value = arg.partition("=")
            _TYPED[flag] = value
        elif arg.startswith("-") and i + 1 < len(argv):
            _TYPED[arg] = argv[i + 1]


def typed_value(flags: Iterable[str]) -> str | None:
    """What the command line typed for the first of ``flags`` (one option's names) it gave, or None."""
    return next((_TYPED[flag] for flag in flags if flag in _TYPED), None)


def as_typed(flag: str, value: Any) -> str:
    """``value`` as the command line typed it for ``flag`` when it parses to that value, else as it is (a blank
    string quoted, as a shell would need it: ``--method ''``)."""
    if isinstance(value, str) and not value.strip():
        return repr(value)
    typed = _TYPED.get(flag)
    if typed is None:
        return str(value)
    try:
        same = type(value)(typed) == value if isinstance(value, (int, float)) else typed == str(value)
    except (TypeError, ValueError):
        same = False
    return typed if same else str(value)


class ParameterError(InputError):
    """A parameter outside its domain: ``str()`` names the keyword; :meth:`cli` names the flag. A ``domain``
    that names other options writes them ``{keyword}`` and gives their flags in ``options`` (:class:`OptionError`)."""

    def __init__(self, name: str, value: Any, domain: str, flag: str | None = None, owner: str = "",
                 **options: Any):
        self.name, self.value, self.domain, self.flag, self.owner, self.options = name, value, domain, flag, owner, options
        super().__init__(f"{name}={value!r}: must be {name_options(domain, options, True)}{owner}")

    def cli(self) -> str:
        """The message with the flag (``--k 0: must be an integer >= 1``)."""
        flag = self.flag or flag_of(self.name)
        return f"{flag} {as_typed(flag, self.value)}: must be {name_options(self.domain, self.options, False)}{self.owner}"


class TextError(ParameterError):
    """A text parameter that is not a non-blank string: named without echoing the text (an instruction may run to
    thousands of characters)."""

    def __init__(self, name: str, got: str, flag: str | None = None):
        self.name, self.value, self.flag, self.owner, self.options = name, got, flag, "", {}
        self.got, self.domain = got, "a non-blank text"
        InputError.__init__(self, f"{name}: must be {self.domain}, got {got}")

    def cli(self) -> str:
        return f"{self.flag or flag_of(self.name)}: must be {self.domain}, got {self.got}"


def check_text(value: Any, name: str, flag: str | None = None) -> None:
    """``value`` (None: not given) is a string, not blank, or :class:`TextError`. (No length bound: a long text is
    the prompt's fit to say, warned or refused before any call.)"""
    if value is None:
        return
    if not isinstance(value, str):
        got = type(value).__name__
    elif not value.strip():
        got = repr(value)
    else:
        return
    raise TextError(name, got, flag)


@dataclass(frozen=True)
class Option:
    """The one declaration of an option, for a method's parameters record and a backend's options record alike:
    ``name`` (the keyword; empty: the record field's own name), ``kind`` (what the flag parses: int, float, str or
    an enum; None: the field's annotation), ``help``, ``domain`` (checked when the record is made, before any
    model call), ``flag`` (when not ``--name``) and ``cli`` (False: a checked field that is no option, such as
    the N a method's name carries). ``reads`` and ``writes`` declare a file the value names, so that a command
    checks it with its other files before anything is written (:func:`~acurank_cli.plugins.declared_files`):
    ``reads`` True (the value is a path read) or a function of the value giving the path read, or None where it
    names no file (``--prompt``: a template file, or a format's name); ``writes`` True: the value is a path the run
    appends to (a log, continued when the run resumes). ``Option(...)(default)`` is the record's field."""

    name: str = ""
    kind: type | None = None
    help: str = ""
    domain: Domain | None = None
    flag: str | None = None
    cli: bool = True
    reads: Any = None
    writes: bool = False

    @property
    def cli_flag(self) -> str:
        return self.flag or flag_of(self.name)

    def __call__(self, default: Any) -> Any:
        """A dataclass field for this option with a record's ``default``."""
        meta = {"option": self, "domain": self.domain, "flag": self.flag, "help": self.help, "cli": self.cli}
        if isinstance(default, (list, dict, set)):
            return field(default_factory=lambda: type(default)(default), metadata=meta)
        return field(default=default, metadata=meta)


class NotAnOption(InputError):
    """The one refusal of an option the chosen plug-in (a method, a backend) does not take: ``str()`` names the
    keywords (the API), :meth:`cli` the flags. ``owner`` says whose (``method 'sw-1' does not use``, ``reranker
    'hf' has no option``), ``takes`` what it takes, in the order shown, and ``flags`` the flag of a name whose flag
    is not its spelling by :func:`flag_of` (``m`` -> ``--window``)."""

    def __init__(self, owner: str, given: list[str], takes: list[str], flags: dict[str, str] | None = None):
        self.owner, self.given, self.takes, self.flags = owner, list(given), list(takes), dict(flags or {})
        super().__init__(self._text(lambda k: k))

    def _text(self, name) -> str:
        return (f"{self.owner} {', '.join(name(k) for k in self.given)} "
                f"(its options: {', '.join(name(k) for k in self.takes) or 'none'})")

    def cli(self) -> str:
        return self._text(lambda k: self.flags.get(k) or flag_of(k))

    def said_to(self, fields: Any = ()) -> str:
        """As a server says it: a request's ``fields`` by their names, the options it cannot set as the flags."""
        return self._text(lambda k: k if k in fields else (self.flags.get(k) or flag_of(k)))


def check_domains(record: Any, owner: str = "") -> None:
    """Raise :class:`ParameterError` for the first field of ``record`` outside its declared domain
    (None passes where the default is None: "not set")."""
    for f in fields(record):
        domain = f.metadata.get("domain")
        if domain is None:
            continue
        value = getattr(record, f.name)
        if value is None and (f.default is None or f.default is MISSING):
            continue
        if not domain.contains(value):
            raise ParameterError(f.name, value, domain.describe(), f.metadata.get("flag"), owner)


__all__ = ["ANY_INT", "Domain", "NotAnOption", "ParameterError", "at_least", "between", "check_domains", "Option", "positive"]
