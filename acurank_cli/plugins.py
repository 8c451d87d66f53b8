"""The one registry type and the one loader of plug-ins, for methods and backends alike.

A :class:`Registry` holds one kind of plug-in (methods, backends): its entries in registration order, built-ins
registered exactly as plug-ins are (a module's one registration call, found by :class:`PluginModules`), and the
one options table of their records (:meth:`Registry.table`), which makes the flags, the API keywords, the help
and the support matrix. The loader: a kind of plug-in is found in the modules of the
package that register the built-ins, the installed distributions' entry points of its group
(``acurank.methods``, ``acurank.rerankers``) and the modules its environment variable names
(``ACURANK_METHODS``, ``ACURANK_BACKENDS``: comma-separated). Each module registers its plug-ins once, when it is
imported; a module that fails to import is one line naming it (never a traceback), and a built-in module whose
optional dependency is not installed is skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import os
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from .errors import InputError
from .params import Option


@functools.lru_cache(maxsize=1)
def _declared_groups() -> frozenset[str]:
    """The entry-point groups that distributions on the path may declare: each ``[group]`` header of an
    ``entry_points.txt`` of a ``*.dist-info``/``*.egg-info`` folder (or an unzipped egg's) of a path directory;
    a path entry that is a file (a zip, an egg) gives ``"*"``, any group. A pre-check only (read once a process),
    so that a process with no plug-in installed never imports :mod:`importlib.metadata`, which costs about 0.1 s
    of every command's start (its import and a read of every distribution's metadata: issue 85); the entries
    themselves are always read by :mod:`importlib.metadata`."""
    groups: set[str] = set()
    for entry in sys.path:
        try:
            folders = os.scandir(entry or ".")
        except NotADirectoryError:
            groups.add("*")  # a zip or an egg file on the path: let importlib.metadata read it
            continue
        except OSError:
            continue
        with folders:
            for folder in folders:
                if folder.name.endswith((".dist-info", ".egg-info")):
                    declared = os.path.join(folder.path, "entry_points.txt")
                elif folder.name.endswith(".egg"):  # an unzipped egg: its metadata under EGG-INFO
                    declared = os.path.join(folder.path, "EGG-INFO", "entry_points.txt")
                else:
                    continue
                try:
                    with open(declared, encoding="utf-8", errors="replace") as text:
                        groups.update(line.strip()[1:-1] for line in text if line.lstrip().startswith("["))
                except OSError:
                    continue
    return frozenset(groups)


@functools.lru_cache(maxsize=None)
def _entry_point_modules(group: str) -> tuple[str, ...]:
    """The modules of an entry-point group (scanned once per process: the scan reads every distribution's
    metadata)."""
    if not {group, "*"} & _declared_groups():
        return ()
    from importlib.metadata import entry_points

    return tuple(ep.value for ep in entry_points(group=group))


@dataclass
class PluginModules:
    """The modules that register one kind of plug-in (``what``: "method", "reranker")."""

    what: str
    group: str
    variable: str
    builtin: tuple[str, ...] = ()
    loaded: set[str] = field(default_factory=set)

    def modules(self) -> list[str]:
        named = [m.strip() for m in os.environ.get(self.variable, "").split(",") if m.strip()]
        return [*self.builtin, *_entry_point_modules(self.group), *named]

    def load(self, strict: bool = True) -> None:
        """Import every module not imported yet; ``strict=False`` skips a plug-in that fails (building the CLI's
        flags: the command that uses it reports it)."""
        for module in self.modules():
            if module in self.loaded:
                continue
            try:
                with contextlib.redirect_stdout(sys.stderr):  # a plug-in that prints at import: never into a run
                    importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - a plug-in that fails to import is reported, never a traceback
                builtin = module in self.builtin
                if builtin and isinstance(exc, ModuleNotFoundError) and exc.name == module:
                    continue  # a built-in module not installed in this build
                if builtin and not isinstance(exc, ImportError):
                    raise
                if strict:
                    reason = str(exc) if isinstance(exc, ModuleNotFoundError) else f"{type(exc).__name__}: {exc}"
                    raise InputError(f"cannot import {self.what} module {module!r} ({reason})") from None
            else:
                self.loaded.add(module)


def declared_options(record: type) -> list[tuple[dataclasses.Field, Option]]:
    """The options of a method's parameters record or a backend's options record: each field made with
    ``Option(...)(default)`` that is a flag (``cli``), with its declaration resolved (the field's name and
    annotation where the declaration gives none)."""
    found = [(f, f.metadata["option"]) for f in dataclasses.fields(record)
             if "option" in f.metadata and f.metadata["option"].cli]
    hints = typing.get_type_hints(record) if any(o.kind is None for _, o in found) else {}
    return [(f, dataclasses.replace(o, name=o.name or f.name, kind=o.kind or hints[f.name])) for f, o in found]


def declared_files(record: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The files a checked options record's values name, as (flag, path): those read and those written (the
    declarations' ``reads`` and ``writes``: :class:`~acurank_cli.params.Option`)."""
    reads: list[tuple[str, str]] = []
    writes: list[tuple[str, str]] = []
    for f, option in declared_options(type(record)):
        value = getattr(record, f.name)
        if value is None:
            continue
        path = (option.reads(value) if callable(option.reads) else value) if option.reads else None
        if path is not None:
            reads.append((option.cli_flag, str(path)))
        if option.writes:
            writes.append((option.cli_flag, str(value)))
    return reads, writes


@dataclass(frozen=True)
class Declared:
    """One option of a registry's table: its declaration and, per entry that takes it, that entry and its
    default."""

    decl: Option
    owners: tuple[tuple[Any, Any], ...]

    @property
    def flag(self) -> str:
        return self.decl.cli_flag


E = TypeVar("E")


@dataclass
class Registry(Generic[E]):
    """One kind of plug-in: ``what`` ("method", "reranker"), its entries by name in registration order, the modules
    that register them (``modules``; the built-ins' first), where its shared declarations live (``home``, said when
    two entries declare one option differently) and how its table shows an option in help (``describe``:
    (option, baseline only) -> text; ``shown``: whether the option is shown there). An entry has a ``record``:
    the type whose option fields are its options."""

    what: str
    modules: PluginModules
    home: str
    describe: Callable[[Declared, bool], str]
    shown: Callable[[Declared, bool], bool] = lambda option, baseline_only: True
    entries: dict[str, E] = field(default_factory=dict)
    _table: dict[str, Declared] | None = field(default=None, repr=False)

    def register(self, name: str, entry: E) -> E:
        """Add (or replace) the entry ``name``: the one registration call of a built-in and a plug-in alike."""
        self.entries[name] = entry
        self._table = None
        return entry

    def load(self, strict: bool = True) -> dict[str, E]:
        """Every entry, after importing the modules that register them (``strict=False``: a plug-in that fails
        to import is skipped; the command that uses it reports it)."""
        self.modules.load(strict)
        return self.entries

    def table(self, strict: bool = True) -> dict[str, Declared]:
        """Every entry's options, name -> :class:`Declared`. Two entries that take an option of one name must
        share its declaration, or one flag would mean two things."""
        entries = self.load(strict)
        if self._table is None:
            out: dict[str, Declared] = {}
            for name, entry in entries.items():
                for f, decl in declared_options(entry.record):
                    seen = out.get(decl.name)
                    if seen is not None and seen.decl != decl:
                        owners = ", ".join(self.name_of(e) for e, _ in seen.owners)
                        raise InputError(f"{self.what} {name!r} declares {decl.cli_flag} differently from {owners}: "
                                         f"share one declaration ({self.home})")
                    out[decl.name] = Declared(decl, (*(seen.owners if seen else ()), (entry, f.default)))
            self._table = out
        return self._table

    def name_of(self, entry: E) -> str:
        return next(name for name, e in self.entries.items() if e is entry)

    def flags(self) -> dict[str, str]:
        """Option name -> its flag, for a message naming flags."""
        return {name: o.flag for name, o in self.table(strict=False).items()}
