"""The query-set budget (``--budget-total``): which queries' optional steps the driver sends next.

Per-query budgets (B, acurank-N, R) treat every query alike. A query-set budget spends a total for the whole
run where it is worth most. Every query's mandatory steps (AcuRank's initial pass: ``Step.value`` is None)
are granted first. Optional steps (AcuRank's adaptive iterations) carry their worth, ``Step.value``: the
expected number of true top-k documents the query's current top k misses, k - sum of s_i over it. They wait
in one pool over the whole run; each wave grants up to ``wave`` of them, highest worth per call first (ties
by qid), each only if it fits in what is left. When no waiting step fits, all are refused and their queries
finish with their ratings as they stand (stop reason ``set-budget``); a query also finishes by its own
rule (tau, ...) as usual.

The allocation depends only on the query set, the budget, the wave and the answers, never on the order of
the queries or how many a process advances together (``--batch-queries``): the driver holds every query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..records import Step


def step_calls(step: Step) -> int:
    """Calls a step costs: its windows of two or more documents (one-document windows are never sent)."""
    return sum(1 for w in step.windows if len(w) >= 2)


@dataclass
class BudgetGrants:
    """The run's budget in calls, what is spent, and the wave size."""

    total: int
    wave: int
    spent: int = 0

    @property
    def left(self) -> int:
        return self.total - self.spent

    def grant(self, pending: Sequence[tuple[str, Step]]) -> tuple[set[int], set[int]]:
        """(granted, refused) indices of the pending (qid, step) pairs; the others wait for a later wave."""
        mandatory = {i for i, (_, step) in enumerate(pending) if step.value is None}
        if mandatory:  # initial passes (and finished plans) first: optional steps wait until they are done
            self.spent += sum(step_calls(pending[i][1]) for i in mandatory)
            return mandatory, set()
        ranked = sorted(range(len(pending)),
                        key=lambda i: (-pending[i][1].value / max(1, step_calls(pending[i][1])), pending[i][0]))
        granted: set[int] = set()
        for i in ranked:
            if len(granted) == self.wave:
                break
            cost = step_calls(pending[i][1])
            if cost <= self.left:
                granted.add(i)
                self.spent += cost
        if not granted:
            return set(), set(range(len(pending)))
        return granted, set()
