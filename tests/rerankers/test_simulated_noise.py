"""The simulated reranker's two LLM-like error models, by hand: a persistent error per (query, document) and a
primacy bias by presented position; both off by default (the specified oracle and its fingerprint unchanged)."""

from __future__ import annotations

import hashlib
import statistics

import pytest

from acurank_cli.params import ParameterError
from acurank_cli.records import RerankRequest
from acurank_cli.rerankers.backend import build_reranker
from acurank_cli.rerankers.backends.simulated import SimulatedReranker, simulated_order, simulated_scores

from conftest import acurank, small_run


def z(key: str) -> float:
    u = int(hashlib.sha256(key.encode()).hexdigest()[:16], 16) / 2**64
    return statistics.NormalDist().inv_cdf(min(max(u, 1e-12), 1 - 1e-12))


def test_persistent_error_is_the_same_in_every_window():
    """noise 0, S = 0.7: score(d) = g(d) + 0.7 z_d with z_d from sha256("acurank-sim-doc|3|q1|d"): the order of
    any two documents is the same whatever the window and its presentation."""
    grades = {"a": 1, "b": 0, "c": 0, "d": 2}
    zs = {d: z(f"acurank-sim-doc|3|q1|{d}") for d in "abcde"}
    expected = {d: grades.get(d, 0) + 0.7 * zs[d] for d in "abcde"}
    for window in (["a", "b", "c"], ["c", "e", "a", "d"], ["d", "c", "b", "a", "e"]):
        assert simulated_scores("q1", window, grades, 0.0, 3, persistent=0.7) == [expected[d] for d in window]
        order = simulated_order("q1", window, grades, 0.0, 3, persistent=0.7)
        assert [window[i] for i in order] == sorted(window, key=lambda d: -expected[d])
    # with fresh noise too, the persistent part is added to the specified score
    fresh = z("acurank-sim|3|q1|a,b|a")
    assert simulated_scores("q1", ["a", "b"], grades, 0.5, 3, persistent=0.7)[0] == pytest.approx(1 + 0.5 * fresh + 0.7 * zs["a"])


def test_primacy_bias_by_hand():
    """noise 0, B = 1, window of L = 5: the bias is 1, 3/4, 1/2, 1/4, 0 by position. Equal grades keep the
    presented order; a grade-1 document presented last (1 + 0) ties the first (0 + 1) and loses the tie (smaller
    position wins); with B = 0.9 it wins."""
    window = ["p", "q", "r", "s", "t"]
    assert simulated_scores("q", window, {}, 0.0, 0, position=1.0) == [1.0, 0.75, 0.5, 0.25, 0.0]
    assert simulated_order("q", window, {}, 0.0, 0, position=1.0) == (0, 1, 2, 3, 4)
    assert simulated_order("q", window, {"t": 1}, 0.0, 0, position=1.0) == (0, 4, 1, 2, 3)
    assert simulated_order("q", window, {"t": 1}, 0.0, 0, position=0.9) == (4, 0, 1, 2, 3)


def test_defaults_are_the_specified_oracle_and_its_fingerprint():
    qrels = {"q": {"a": 1}}
    plain = SimulatedReranker(qrels, noise=1.0, seed=0)
    assert set(plain.fingerprint()) == {"backend", "noise", "seed", "qrels"}
    window = ("a", "b", "c", "d")
    request = RerankRequest("q", "", window, ())
    assert plain.rerank_batch([request])[0].order == simulated_order("q", window, qrels["q"], 1.0, 0)
    both = build_reranker("simulated", qrels=qrels, sim_persistent=0.35, sim_position=1.0)
    assert both.fingerprint()["persistent"] == 0.35 and both.fingerprint()["position"] == 1.0
    assert both.name == "simulated(noise=1.0,seed=0,persistent=0.35,position=1.0)"
    assert both.rerank_batch([request])[0].order == simulated_order("q", window, qrels["q"], 1.0, 0, persistent=0.35,
                                                                                position=1.0)
    for bad in ({"sim_persistent": -0.1}, {"sim_position": float("nan")}):
        with pytest.raises(ParameterError):
            build_reranker("simulated", qrels=qrels, **bad)


def test_cli_flags(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=2)
    qrels = sample / "dl19" / "qrels.txt"
    proc = acurank("baseline", run, "--method", "sw-1", "--reranker", "simulated", "--qrels", qrels,
                   "--sim-persistent", "0.35", "--sim-position", "1", "--sim-noise", "0.3", "--quiet")
    assert len(proc.stdout.splitlines()) == 200
    bad = acurank("baseline", run, "--reranker", "simulated", "--qrels", qrels, "--sim-position", "-1", check=False)
    assert bad.returncode == 2 and "--sim-position -1: must be a number >= 0" in bad.stderr  # as typed
