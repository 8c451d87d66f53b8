"""SIGINT and SIGTERM: stop at once with one line and exit 130 / 143, never a traceback.

While :func:`handled` is active, the first SIGINT or SIGTERM raises :class:`Interrupted` wherever the
main thread is. It is a SystemExit (code 128 + the signal number): no library's ``except Exception``
swallows it, neither does asyncio, whose transports catch every BaseException but SystemExit and
KeyboardInterrupt raised inside a socket write (a SIGINT landing there was once logged as "Fatal write
error" and the run went on), nor Typer, which turns a KeyboardInterrupt into a silent exit 130;
later signals are ignored so that clean-up (closing outputs, the call cache) can finish. Finished
queries are on disk and every finished model call is in the call cache, so a rerun of the same
command resumes without paying twice.

A signal can also land where Python cannot raise: in a finaliser or a weakref callback (an import's module-lock
callback, once), where Python prints "Exception ignored" and goes on. The handler has recorded it all the same, and
:func:`check`, called where a run next sends work or finishes a query, raises it there: no call is paid after the
signal, and the run still ends with its one line and 130 / 143. While handled, such an ignored
:class:`Interrupted` is not printed.

An HTTP backend's event loop runs in a thread of its own (:mod:`acurank_cli.rerankers.backends.openai_transport`), so a signal
never lands inside the loop: the waiting caller is interrupted, its batch cancelled on the loop.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(SystemExit):
    """The process received SIGINT or SIGTERM; ``exit_code`` (and ``code``) is 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum
        self.exit_code = 128 + signum

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


class _State:
    signum: int | None = None
    active: bool = False  # handled() has installed its handler


_state = _State()


def received() -> int | None:
    """The signal received while handled (None if none)."""
    return _state.signum


def check() -> None:
    """Raise :class:`Interrupted` if a signal was received while handled: one whose exception Python could not
    raise where it landed (see the module's doc). Where work goes on after a delivered signal, nothing calls this."""
    if _state.active and _state.signum is not None:
        raise Interrupted(_state.signum)


def _unraisable(saved):
    """``sys.unraisablehook`` while handled: an :class:`Interrupted` ignored in a finaliser is not printed (the
    signal is raised again at the next :func:`check`); anything else goes to the hook that was there."""

    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            saved(unraisable)

    return hook


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Turn SIGINT/SIGTERM into :class:`Interrupted` for the duration (main thread only)."""

    def on_signal(signum, frame):
        if _state.signum is None:
            _state.signum = signum
            raise Interrupted(signum)

    saved = {}
    try:
        for sig in SIGNALS:
            saved[sig] = signal.signal(sig, on_signal)
    except ValueError:  # not the main thread: leave signals alone
        saved = {}
    _state.signum = None
    _state.active = bool(saved)
    hook = sys.unraisablehook
    if saved:
        sys.unraisablehook = _unraisable(hook)
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)
        sys.unraisablehook = hook
        _state.signum = None
        _state.active = False
