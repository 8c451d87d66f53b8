"""The SQLite stores a command opens beside its outputs (the call cache, the embedding store beside it): each checked
usable where the command will open or make it, before anything is made or any model loads, and refused in one line
naming it (:func:`refused`). The command line's file plan checks them with its other outputs
(:class:`~acurank_cli.io.plan.FilePlan`); the API and the servers where their session loads its backend
(:meth:`~acurank_cli.run.pipeline.Session.load`)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import OptionError


def usable(path: Path, what: str) -> None:
    """Check that a store (``what``: the call cache, its embedding store) can be opened and written where the
    run will make or open it, making nothing (a refused run left an empty cache behind): an existing file readable
    as SQLite (opened read-only and closed) and writable, a missing one in a folder that can be made and written
    (its nearest existing parent a writable folder). Else the one-line refusal (:func:`refused`)."""
    try:
        if path.exists():
            if path.is_dir():
                raise IsADirectoryError(f"{path} is a folder")
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)  # a name with ? or # escaped
            try:
                db.execute("PRAGMA schema_version").fetchone()
            finally:
                db.close()
            if not os.access(path, os.W_OK):
                raise PermissionError(f"{path} is not writable")
            return
        parent = path.absolute().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise NotADirectoryError(f"{parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(f"{parent} is not writable")
    except (OSError, sqlite3.Error) as exc:
        raise refused(what, exc, path) from None


def refused(what: str, exc: BaseException, path: str | Path) -> OptionError:
    """The error for a store that cannot be opened or made (``what``: the call cache, its embedding store)."""
    return OptionError(f"cannot use {what} ({OptionError.literal(str(exc))}); give another {{cache}} or {{no_cache}}",
                       str(path), cache="--cache", no_cache={"api": "cache=None", "cli": "--no-cache"})


__all__ = ["refused", "usable"]
