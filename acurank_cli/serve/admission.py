"""The server's admission queue: the requests of ``acurank serve`` admitted to its one driver (:class:`Feed`, read by
:meth:`~acurank_cli.run.driver.Driver.serve`), withdrawn when their caller is gone, closed at shutdown."""

from __future__ import annotations

import collections
import threading
from typing import Callable, Hashable

from ..run.driver import Admission


class Feed:
    """The requests of a server, for :meth:`Driver.serve`: admitted from any thread (:meth:`admit`), withdrawn
    when their caller is gone (:meth:`withdraw`); :meth:`close` lets the driver finish what it holds and end."""

    def __init__(self):
        self.lock = threading.Condition()
        self.waiting: collections.deque[Admission] = collections.deque()
        self.gone: list[Hashable] = []
        self.closed = False
        self.wake: Callable[[], None] | None = None

    @property
    def exhausted(self) -> bool:
        with self.lock:
            return self.closed and not self.waiting

    def admit(self, admission: Admission) -> None:
        with self.lock:
            if self.closed:
                raise RuntimeError("the feed is closed")
            self.waiting.append(admission)
            self.lock.notify_all()
        if self.wake is not None:
            self.wake()

    def withdraw(self, key: Hashable) -> None:
        with self.lock:
            kept = [a for a in self.waiting if a.key != key]
            if len(kept) == len(self.waiting):  # not waiting here: in flight, or finished already
                self.gone.append(key)
            self.waiting = collections.deque(kept)
            self.lock.notify_all()
        if self.wake is not None:
            self.wake()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify_all()
        if self.wake is not None:
            self.wake()

    def take(self) -> Admission | None:
        """The request that came first, or None when none is waiting."""
        with self.lock:
            return self.waiting.popleft() if self.waiting else None

    def withdrawn(self) -> list[Hashable]:
        with self.lock:
            gone, self.gone = self.gone, []
        return gone

    def wait(self) -> None:
        with self.lock:
            while not self.waiting and not self.closed and not self.gone:
                self.lock.wait(0.5)


__all__ = ["Admission", "Feed"]
