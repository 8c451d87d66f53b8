"""Drive a strategy's plan directly with a scripted reranker (no driver, no backend)."""

from __future__ import annotations

from typing import Callable, Sequence

from acurank_cli.records import Candidate, RankingTask


def reverse(window: Sequence[str]) -> tuple[int, ...]:
    """Every window returned back to front."""
    return tuple(reversed(range(len(window))))


def keep(window: Sequence[str]) -> tuple[int, ...]:
    """Every window returned as sent (first-stage order)."""
    return tuple(range(len(window)))


def task(n: int, qid: str = "q", top: float = 50.0, step: float = 0.3) -> RankingTask:
    """n candidates d0..d{n-1} with first-stage scores top, top - step, ..."""
    return RankingTask(qid, "query", tuple(Candidate(f"d{i}", top - step * i) for i in range(n)))


def drive(strategy, ranking_task: RankingTask, answer: Callable[[Sequence[str]], Sequence[int]] = reverse):
    """Run the plan; return ([(step, its snapshot or None)], the final ranking the plan returned)."""
    plan = strategy.plan(ranking_task)
    steps = []
    try:
        step = next(plan)
        while True:
            steps.append((step, step.snapshot() if step.snapshot else None))
            step = plan.send([tuple(answer(w)) for w in step.windows])
    except StopIteration as done:
        return steps, done.value


def by_index(window: Sequence[str]) -> tuple[int, ...]:
    """The true order d0 > d1 > ...: a reranker that agrees with the first stage wherever it looks."""
    return tuple(sorted(range(len(window)), key=lambda j: int(window[j][1:])))
