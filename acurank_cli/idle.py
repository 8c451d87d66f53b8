"""Work a process can do while it waits on a model: imports a run needs only after its first answers.

A run's first windows are planned and sent before any rating is assessed; the answers take a model's time (200 ms
and more from a remote server), while the process sits idle. A module that will need a slow import later (scipy's
``ndtr``: 0.2-0.3 s) registers it with :func:`when_waiting`; the first wait on a model (:func:`waiting`, called by the
run's lanes before they block) starts one thread that does every registered piece of work once. Work registered
after that starts at the next wait. Nothing here is required: a piece of work not done yet is done by whoever needs
it first (each one is written so that doing it twice is harmless), so a process that never waits is unchanged.

Started at the first wait, not when registered: before the first request is out the process is busy (prompts,
imports of the transport), and a second thread holding the interpreter then only delays the first call.
"""

from __future__ import annotations

import threading
from typing import Callable

_LOCK = threading.Lock()
_pending: list[Callable[[], None]] = []
_done: set[Callable[[], None]] = set()


def when_waiting(work: Callable[[], None]) -> None:
    """Do ``work`` (no arguments, idempotent) in a thread at the process's next wait on a model; once a process."""
    with _LOCK:
        if work not in _done and work not in _pending:
            _pending.append(work)


def waiting() -> None:
    """The process is about to wait on a model: start what was registered, in one thread (not a daemon: a process
    that ends meanwhile lets an import finish rather than stop it half done)."""
    with _LOCK:
        if not _pending:
            return
        work = list(_pending)
        _pending.clear()
        _done.update(work)
    threading.Thread(target=_run, args=(work,), name="acurank-while-waiting").start()


def _run(work: list[Callable[[], None]]) -> None:
    for w in work:
        try:
            w()
        except Exception:  # noqa: BLE001 - its owner does it again when it needs it, and raises there
            pass
