"""The lanes: how queued windows are handed to a backend with several lanes (issue 86: Ray actors over a backend
that takes any batch, where one lane took every waiting window while the others idled)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from acurank_cli.records import RerankRequest, RerankResult
from acurank_cli.rerankers.backend import RerankerBase
from acurank_cli.run.lanes import Job, Lanes


class Batching(RerankerBase):
    """Takes any batch (``lane_batch`` None) on ``lanes`` lanes; 20 ms a window; records each call's size and lane."""

    name, needs_texts, lane_batch = "batching", False, None

    def __init__(self, lanes: int):
        self.lanes = lanes
        self.calls: list[tuple[int, str]] = []
        self.lock = threading.Lock()

    def rerank(self, requests, on_result=None):
        with self.lock:
            self.calls.append((len(requests), threading.current_thread().name))
        time.sleep(0.02 * len(requests))
        return [RerankResult(order=(1, 0)) for _ in requests]


def _answers(backend: RerankerBase, windows: int) -> list:
    lanes = Lanes(backend)
    owner = SimpleNamespace(withdrawn=False)
    try:
        lanes.put([Job(owner, j, RerankRequest("q", "query", (f"a{j}", f"b{j}"), (), None), (0, j))
                   for j in range(windows)])
        return [lanes.next() for _ in range(windows)]
    finally:
        lanes.close()


def test_several_lanes_split_the_waiting_windows_instead_of_one_lane_taking_all():
    """16 windows waiting, 4 lanes: each call takes its share, ceil(waiting / lanes), so the calls take 4, 3, 3, 2,
    1, 1, 1, 1 windows whatever the timing (each take sees only what the ones before left); before, one lane took
    all 16 in one call while three idled."""
    backend = Batching(lanes=4)
    answered = _answers(backend, 16)
    assert sorted(job.j for job, _, _ in answered) == list(range(16))  # every window answered once
    assert sorted((n for n, _ in backend.calls), reverse=True) == [4, 3, 3, 2, 1, 1, 1, 1]


def test_one_lane_still_takes_every_waiting_window_as_one_batch():
    """An engine's one lane (run in the driver's thread): every waiting window in one call, as before."""
    backend = Batching(lanes=1)
    _answers(backend, 16)
    assert backend.calls == [(16, threading.current_thread().name)]
