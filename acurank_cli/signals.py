"""SIGINT and SIGTERM: stop at once with one line and exit 130 / 143, never a traceback.

While :func:`handled` is active, the first SIGINT or SIGTERM raises :class:`Interrupted` wherever the
main thread is. It is a SystemExit (code 128 + the signal number): no library's ``except Exception``
swallows it, neither does asyncio, whose transports catch every BaseException but SystemExit and
KeyboardInterrupt raised inside a socket write (a SIGINT landing there was once logged as "Fatal write
error" and the run went on), nor Typer, which turns a KeyboardInterrupt into a silent exit 130;
later signals are ignored so that clean-up (closing outputs, the call cache) can finish. Finished
queries are on disk and every finished model call is in the call cache, so a rerun of the same
command resumes without paying twice.

Inside an event loop (:func:`run_async`: a batch of HTTP requests) the signal is not raised where the loop
happens to be, which could be half-way through an asyncio primitive (a condition re-acquiring its lock once
left a task failing with "Lock is not acquired." and asyncio printing its traceback at shutdown); the loop
cancels the batch instead, every task unwinds through its ``finally`` blocks, and :class:`Interrupted` is
raised once the loop has closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from typing import Any, Coroutine, Iterator, TypeVar

T = TypeVar("T")
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
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)
        _state.signum = None
        _state.active = False


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``; while :func:`handled` is active (main thread), the first SIGINT or SIGTERM cancels
    ``coro`` through the loop, and :class:`Interrupted` is raised after every task has unwound and the loop has
    closed. Later signals are ignored, as under :func:`handled`."""
    if not _state.active or threading.current_thread() is not threading.main_thread():
        return asyncio.run(coro)

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        saved = {sig: signal.getsignal(sig) for sig in SIGNALS}

        def on_signal(signum: int) -> None:
            if _state.signum is None:
                _state.signum = signum
                task.cancel()

        try:
            for sig in SIGNALS:
                loop.add_signal_handler(sig, on_signal, sig)
            return await coro
        finally:
            for sig in SIGNALS:  # remove_signal_handler leaves the default handler: put handled()'s back
                loop.remove_signal_handler(sig)
                signal.signal(sig, saved[sig])

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if _state.signum is not None:
            raise Interrupted(_state.signum) from None
        raise
