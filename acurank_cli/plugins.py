"""The one loader of plug-ins, for methods and backends alike: a kind of plug-in is found in the modules of the
package that register the built-ins, the installed distributions' entry points of its group
(``acurank.methods``, ``acurank.rerankers``) and the modules its environment variable names
(``ACURANK_METHODS``, ``ACURANK_BACKENDS``: comma-separated). Each module registers its plug-ins once, when it is
imported; a module that fails to import is one line naming it (never a traceback), and a built-in module whose
optional dependency is not installed is skipped.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass, field

from .errors import InputError


@functools.lru_cache(maxsize=None)
def _entry_point_modules(group: str) -> tuple[str, ...]:
    """The modules of an entry-point group (scanned once per process: the scan reads every distribution's
    metadata)."""
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
