"""The lanes: how queued windows are handed to a backend with several lanes (issue 86: Ray actors over a backend
that takes any batch, where one lane took every waiting window while the others idled)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from acurank_cli.records import RerankRequest, RerankResult
from acurank_cli.rerankers.backend import RerankerBase
from acurank_cli import idle
from acurank_cli.run import lanes as lanes_module
from acurank_cli.run.lanes import IDLE_AFTER, Job, Lanes


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


class Slow(RerankerBase):
    """Two lanes (a server's requests in flight); each window answered after ``seconds``."""

    name, needs_texts, lane_batch, lanes = "slow", False, 1, 2

    def __init__(self, seconds: float):
        self.seconds = seconds

    def rerank(self, requests, on_result=None):
        time.sleep(self.seconds)
        return [RerankResult(order=(1, 0)) for _ in requests]


def _kept_for_a_wait(monkeypatch) -> list:
    """A piece of work kept for the process's next wait on a model (acurank_cli.idle), recording when and where it
    ran; the module's state fresh for the test."""
    monkeypatch.setattr(idle, "_pending", [])
    monkeypatch.setattr(idle, "_done", set())
    ran: list = []
    idle.when_waiting(lambda: ran.append((time.perf_counter(), threading.current_thread().name)))
    return ran


def test_work_kept_for_a_wait_runs_while_the_windows_are_out(monkeypatch):
    """The driver waits on a window that takes 0.5 s: once no answer has come for IDLE_AFTER, the kept work (scipy's
    import in a run) runs in a thread of its own, before the answer arrives; it runs once."""
    ran = _kept_for_a_wait(monkeypatch)
    put = time.perf_counter()
    answered = _answers(Slow(0.5), 1)
    arrived = time.perf_counter()
    assert len(answered) == 1 and len(ran) == 1
    (when, thread), = ran
    assert put + IDLE_AFTER <= when < arrived - 0.25  # during the wait, not before the sending had its time
    assert thread == "acurank-while-waiting"
    _answers(Slow(0.2), 1)
    assert len(ran) == 1  # done once a process


def test_a_wait_shorter_than_idle_after_leaves_the_kept_work_for_later(monkeypatch):
    """Windows answered within IDLE_AFTER (here 1 s, so that a loaded machine's late threads still answer within
    it): the process never sat idle, so the kept work is not started (the sending and the answers keep the
    interpreter); it runs at a later wait."""
    ran = _kept_for_a_wait(monkeypatch)
    monkeypatch.setattr(lanes_module, "IDLE_AFTER", 1.0)
    _answers(Slow(0.001), 4)
    time.sleep(0.1)
    assert ran == [] and len(idle._pending) == 1
    _answers(Slow(1.3), 1)
    assert len(ran) == 1


def test_kept_work_that_fails_is_left_to_its_owner(monkeypatch):
    """A piece of work that raises is dropped in silence (its owner does it again when it needs it, and raises
    there); the others still run."""
    ran = _kept_for_a_wait(monkeypatch)

    def fails():
        raise RuntimeError("no scipy")

    idle.when_waiting(fails)
    idle.when_waiting(lambda: ran.append("after"))
    _answers(Slow(0.3), 1)
    assert len(ran) == 2 and ran[1] == "after"
