"""The lanes: worker threads that feed the backend the queued windows of every query in flight, the moment a lane is
free (:class:`Lanes`); the driver (:mod:`.driver`) queues each query's windows and reads the answers back as they
arrive. How many lanes and how many windows a call takes is the backend's (``lanes``, ``lane_batch``)."""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from .. import idle
from ..records import RerankRequest, RerankResult
from ..rerankers.backend import RerankerBase

#: seconds without an answer after which a process waiting on its model starts the work kept for such a wait
#: (:mod:`acurank_cli.idle`): by then the requests are out, and the sending no longer needs the interpreter
IDLE_AFTER = 0.05

#: Queries in flight per lane of a backend with several (a server's requests in flight): with 2, the last queries
#: to start were left with their chains of steps while slots sat idle (sw-1, lognormal sd 0.8: 1.24x the ideal
#: wall time); with 4, 1.10x (BENCHMARKS.md 15). Read by the pipeline (how many queries it keeps in flight) and by
#: the Ray executor (how many it sends each worker).
QUERIES_PER_LANE = 4

_WAKE = object()  # on Lanes.done: the driver is woken, no answer


@dataclass(frozen=True)
class Job:
    """One window to execute: its query in flight, its place in the step, the request, its place in the queue
    (lowest first)."""

    owner: Any  # the query in flight (the driver's); only its ``withdrawn`` is read here
    j: int
    request: RerankRequest
    rank: tuple = ()


class Lanes:
    """Worker threads that execute queued windows the moment a lane is free: ``reranker.lanes`` calls of
    :meth:`~acurank_cli.rerankers.backend.RerankerBase.rerank` at once, each of up to ``reranker.lane_batch``
    windows (None: every window waiting), the lowest ``rank`` first (then first queued). Answers come back through
    :meth:`next` as each arrives; a backend's error is raised there, in the driver's thread (a lane never prints).
    The backend's own thread-safety is the backend's: a server's transport is shared by its lanes, an engine has
    one lane."""

    def __init__(self, reranker: RerankerBase):
        self.reranker = reranker
        self.batch = getattr(reranker, "lane_batch", None)  # a wrapper that is no RerankerBase: one batch, one lane
        self.todo: list[tuple[tuple, int, Job]] = []  # a heap: (rank, arrival, job)
        self.arrivals = itertools.count()
        self.ready = threading.Condition()
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.closed = False
        lanes = max(1, int(getattr(reranker, "lanes", 1)))
        #: one lane runs in the driver's own thread (an engine's batch: a signal stops it there, as it always has;
        #: a native library must not be left running in a thread at exit), several in worker threads
        self.threads = [threading.Thread(target=self._work, daemon=True, name=f"acurank-lane-{i}")
                        for i in range(lanes)] if lanes > 1 else []
        for thread in self.threads:
            thread.start()

    def put(self, jobs: list[Job]) -> None:
        with self.ready:
            for job in jobs:
                heapq.heappush(self.todo, (job.rank, next(self.arrivals), job))
            self.ready.notify(len(jobs))

    def wake(self) -> None:
        """Have :meth:`next` return None at once (the driver has something else to look at)."""
        self.done.put(_WAKE)

    def _take(self) -> list[Job]:
        """The next call's windows: up to ``lane_batch`` of the waiting ones, lowest rank first; or, for a backend
        that takes any batch (``lane_batch`` None), every one waiting in the order they were queued (an engine's batch
        is the same whatever the ranks) where it has one lane, and its share where it has several (Ray actors over an
        engine or a plug-in): the waiting windows split evenly over the lanes, lowest rank first, so that no lane
        idles while another holds every window (BENCHMARKS.md 15)."""
        if self.batch is None and len(self.threads) <= 1:
            everything, self.todo = self.todo, []
            return [job for _, _, job in sorted(everything, key=lambda entry: entry[1]) if not job.owner.withdrawn]
        size = self.batch if self.batch is not None else -(-len(self.todo) // len(self.threads))
        chunk: list[Job] = []
        while self.todo and len(chunk) < size:
            job = heapq.heappop(self.todo)[2]
            if not job.owner.withdrawn:
                chunk.append(job)
        return chunk

    def next(self) -> tuple[Job, RerankResult, float] | None:
        """The next answer to arrive (job, result, its share of the call's seconds), or None when woken
        (:meth:`wake`); a backend's error raised."""
        if not self.threads and self.done.empty():  # the one lane, inline: every waiting window (or a batch)
            self._call(self._take())
        waited = 0
        while True:
            try:  # short waits: a signal is handled at once; after the first, the process is idle on the model
                arrived = self.done.get(timeout=IDLE_AFTER if waited == 0 else 0.2)
            except queue.Empty:
                waited += 1
                if waited == 1:
                    idle.waiting()
                continue
            if arrived is _WAKE:
                return None
            job, result, seconds = arrived
            if job is None:
                raise result
            return job, result, seconds

    def _work(self) -> None:
        while True:
            with self.ready:
                while not self.todo and not self.closed:
                    self.ready.wait()
                if self.closed:
                    return
                chunk = self._take()
            try:
                self._call(chunk)
            except BaseException as exc:  # noqa: BLE001 - handed to the driver's thread, which raises it
                if not self.closed:
                    self.done.put((None, exc, 0.0))
                return

    def _call(self, chunk: list[Job]) -> None:
        """One call of the backend (the call cache commits each answer inside it as it arrives); the answers handed
        over when it returns, with the call's seconds shared among its windows."""
        if not chunk:  # every window taken was withdrawn
            return
        started = time.perf_counter()
        results = self.reranker.rerank([job.request for job in chunk])
        share = (time.perf_counter() - started) / len(chunk)
        for job, result in zip(chunk, results):
            self.done.put((job, result, share))

    def close(self) -> None:
        """No more work is taken; a call in progress finishes in its (daemon) thread, its answers unread."""
        with self.ready:
            self.closed = True
            self.todo.clear()
            self.ready.notify_all()


__all__ = ["Job", "Lanes", "QUERIES_PER_LANE"]
