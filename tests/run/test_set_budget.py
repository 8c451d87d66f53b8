"""The query-set budget (--budget-total): the allocation by hand, equivalences with per-query runs, order
and batching independence, the refusal before any call, and a resume that replays the allocation."""

from __future__ import annotations

import json
import random

import pytest

from acurank_cli.errors import InputError
from acurank_cli.io.candidates import read_candidates
from acurank_cli.io.collection_files import read_qrels
from acurank_cli.method.registry import build_strategy
from acurank_cli.params import ParameterError
from acurank_cli.records import Phase, RankingTask, Step, StopReason
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from acurank_cli.run.budget_grants import BudgetGrants
from acurank_cli.run.driver import Driver

from conftest import acurank, small_run, torn_copy


def step(calls: int, value: float | None, size: int = 3) -> Step:
    return Step(windows=tuple(tuple(f"d{j}" for j in range(size)) for _ in range(calls)), phase=Phase.adaptive,
                iteration=0, value=value)


def test_allocation_by_hand():
    a = BudgetGrants(total=20, wave=2)
    # mandatory steps (value None) first: only they are granted while any is pending
    assert a.grant([("qa", step(5, None)), ("qb", step(1, 3.0))]) == ({0}, set()) and a.spent == 5
    # worth per call: qa 2.0 / 2 = 1.0, qb 1.5, qc 1.5 (qid after qb), qd 0.1; wave 2: qb and qc
    pending = [("qa", step(2, 2.0)), ("qc", step(1, 1.5)), ("qb", step(1, 1.5)), ("qd", step(1, 0.1))]
    assert a.grant(pending) == ({1, 2}, set()) and a.spent == 7
    a.spent = 19  # one call left: qa (2 calls) does not fit, qd does
    assert a.grant([("qa", step(2, 2.0)), ("qd", step(1, 0.1))]) == ({1}, set()) and a.left == 0
    # nothing fits: everyone waiting is refused
    assert a.grant([("qa", step(2, 2.0)), ("qd", step(1, 0.1))]) == (set(), {0, 1})
    # windows of one document cost nothing
    assert BudgetGrants(0, 1).grant([("q", step(3, 1.0, size=1))]) == ({0}, set())


def test_budget_total_parsing_and_errors():
    s = build_strategy("acurank", budget_total="9x")
    assert s.set_budget.calls(43) == 387 and s.set_budget.wave == 8
    assert build_strategy("acurank", budget_total="500", budget_wave=2).set_budget.calls(43) == 500
    for bad in ("0x", "-3x", "nine", "0", "x"):
        with pytest.raises(ParameterError, match="budget_total"):
            build_strategy("acurank", budget_total=bad)
    with pytest.raises(InputError, match="^budget_wave needs budget_total") as raised:
        build_strategy("acurank", budget_wave=4)
    assert raised.value.cli().startswith("--budget-wave needs --budget-total")
    with pytest.raises(ParameterError, match="budget_wave"):
        build_strategy("acurank", budget_total="9x", budget_wave=0)
    assert build_strategy("acurank").set_budget is None


@pytest.fixture(scope="module")
def dl19(sample):
    bundle, _ = read_candidates(sample / "dl19" / "bm25.run")
    tasks = [RankingTask(q, "", c) for q, c in bundle.runs.items()][:20]
    return tasks, read_qrels(sample / "dl19" / "qrels.txt")


def outcomes(method, tasks, qrels, batch=1, **opts):
    driver = Driver(build_strategy(method, **opts), SimulatedReranker(qrels), batch_queries=batch)
    return {o.qid: o for o in driver.run(tasks)}


def same(a, b):
    return all([r.docid for r in a[q].ranking] == [r.docid for r in b[q].ranking] and a[q].tally.calls == b[q].tally.calls
               for q in a) and a.keys() == b.keys()


def test_a_budget_that_never_binds_is_plain_acurank_and_one_that_covers_the_initial_pass_only_is_acurank_5(dl19):
    tasks, qrels = dl19
    plain = outcomes("acurank", tasks, qrels)
    assert same(outcomes("acurank", tasks, qrels, budget_total="1000x"), plain)
    only_initial = outcomes("acurank", tasks, qrels, budget_total="5x")  # n = 100, m = 20: 5 calls each
    assert all(o.tally.calls == 5 and o.stop is StopReason.set_budget for o in only_initial.values())
    assert same(only_initial, outcomes("acurank-5", tasks, qrels))


def test_spending_is_on_the_most_uncertain_and_independent_of_order_and_batching(dl19):
    tasks, qrels = dl19
    seen: list[tuple[str, float]] = []

    def on_step(task, st):
        if st.value is not None:
            seen.append((task.qid, st.value))
            # the worth: k minus the sum of s_i = P(x_i > t) over the top k by mu (the snapshot's ranks)
            snap = st.snapshot()
            assert st.value == pytest.approx(10 - sum(d.s for d in snap.docs if d.rank <= 10), abs=1e-9)
            assert 0 <= st.value < 10

    driver = Driver(build_strategy("acurank", budget_total="7x", budget_wave=1), SimulatedReranker(qrels), on_step=on_step)
    out = {o.qid: o for o in driver.run(tasks)}
    total = sum(o.tally.calls for o in out.values())
    assert 7 * 20 - 5 < total <= 7 * 20  # at most the budget; short of it by less than one iteration
    assert all(o.tally.calls >= 5 for o in out.values())
    assert {o.stop for o in out.values()} <= {StopReason.set_budget, StopReason.tau, StopReason.converged}
    # wave 1: the first optional iteration granted went to the query worth most per call
    first_wave = {q: v for q, v in seen[: len(tasks)]}
    granted_first = next(q for q, o in out.items() if any(it.phase is not Phase.initial for it in o.iterations))
    assert granted_first in first_wave
    spread = sorted(o.tally.calls for o in out.values())
    assert spread[0] < spread[-1]  # not uniform: the budget went where the top k was uncertain
    shuffled = list(tasks)
    random.Random(0).shuffle(shuffled)
    for order, batch in ((shuffled, 1), (tasks, 16)):
        again = outcomes("acurank", order, qrels, batch=batch, budget_total="7x", budget_wave=1)
        assert same(again, out)


def test_cli_refuses_a_budget_below_the_initial_passes_before_any_call(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=4)
    proc = acurank("rerank", run, "--reranker", "simulated", "--qrels", sample / "dl19" / "qrels.txt",
                   "--budget-total", "4x", "-o", tmp_path / "x.run", check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "--budget-total 4x: must be at least the initial passes' 20 calls over 4 queries (5.00x)" in proc.stderr
    assert not (tmp_path / "x.run").exists()


def test_cli_resume_replays_the_allocation(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=6)
    qrels = sample / "dl19" / "qrels.txt"
    args = ["rerank", run, "--reranker", "simulated", "--qrels", qrels, "--budget-total", "8x", "--budget-wave", "2"]
    full = tmp_path / "full.run"
    acurank(*args, "--output", full)
    text = full.read_text()
    part, stats = torn_copy(full, qids, keep=2)  # two whole queries written
    proc = acurank(*args, "--output", part, "--stats", stats)
    assert "2 of 6" in proc.stderr and "replayed" in proc.stderr
    assert part.read_text() == text
    recs = [json.loads(x) for x in stats.read_text().splitlines()]
    assert [r["qid"] for r in recs] == qids and sum(r["calls"] for r in recs) <= 48
    assert recs[0]["params"]["budget_total"] == "8x" and recs[0]["params"]["budget_wave"] == 2
