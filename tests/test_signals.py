"""SIGINT/SIGTERM inside an event loop (acurank_cli/signals.py, run_async): the batch is cancelled through the
loop, every task unwinds, and Interrupted follows once the loop has closed; asyncio prints nothing."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time

import pytest

from acurank_cli import signals


async def churn(finished: list[str], started: threading.Event) -> None:
    """Eight tasks taking, waiting on and notifying one condition without end; each records how it ended (a
    signal raised inside the loop lands in whichever task is running, half-way through its step)."""
    cond = asyncio.Condition()

    async def one(i: int) -> None:
        try:
            while True:
                async with cond:
                    busy = time.perf_counter()
                    while time.perf_counter() - busy < 0.002:  # Python code inside the step: where a signal
                        pass  # raised in the loop would land (as "Task exception was never retrieved")
                    cond.notify_all()
                    try:
                        async with asyncio.timeout(0.001):
                            await cond.wait()
                    except TimeoutError:
                        pass
                started.set()
        except BaseException as exc:
            finished.append(f"task {i}: {type(exc).__name__}")
            raise

    await asyncio.gather(*(one(i) for i in range(8)))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_the_loop_then_interrupts(sig, caplog):
    finished: list[str] = []
    started = threading.Event()

    def send() -> None:
        started.wait(10)
        os.kill(os.getpid(), sig)
        os.kill(os.getpid(), sig)  # a second signal while the tasks unwind: ignored

    sender = threading.Thread(target=send)
    with caplog.at_level(logging.DEBUG, logger="asyncio"), signals.handled():
        sender.start()
        with pytest.raises(signals.Interrupted) as info:
            signals.run_async(churn(finished, started))
        assert signals.received() == sig
        saved = signal.getsignal(sig)
    sender.join()
    assert info.value.exit_code == 128 + sig
    assert sorted(finished) == [f"task {i}: CancelledError" for i in range(8)]  # cancelled, none broken into
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert callable(saved) and saved not in (signal.SIG_DFL, signal.default_int_handler)  # handled()'s is back


def test_without_handled_it_is_asyncio_run():
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert signals.run_async(answer()) == 42
