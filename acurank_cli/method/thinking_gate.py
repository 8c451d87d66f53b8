"""Gated thinking (``--thinking gated``), in one place: the measure each window is judged by (:func:`unsettled`), the
threshold (``--think-above``, :data:`DEFAULT_THINK_ABOVE`), the rule that picks the windows that think under a
per-query budget (:meth:`ThinkingGate.decide`), its application to a step (:meth:`ThinkingGate.apply`, what the
driver asks) and the methods it needs (:meth:`ThinkingGate.check`). A method's steps carry the measure lazily
(``Step.unsettled``); the gate is built from a backend's thinking options (:func:`~acurank_cli.rerankers.listwise.
thinking.gate_of`); docs/thinking.md says why this measure.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..errors import OptionError
from ..records import CallTally, Step

#: ``--think-above``'s default: a window thinks while a document in it keeps half its prior rating uncertainty
#: (:func:`unsettled`; chosen on the simulated benchmark, BENCHMARKS.md 19).
DEFAULT_THINK_ABOVE = 0.5


def unsettled(sigma, prior, groups) -> tuple[float, ...]:
    """The measure (``--think-above``; docs/thinking.md): per window, in [0, 1], the largest share of its prior
    uncertainty a document in it still has, max_i sigma_i / prior_i (prior = sigma before any answer; a document with
    no prior spread counts as 1). 1 for a document no answer has judged yet, and it falls as answers judge it: a
    window thinks while its ratings are young, when one answer moves them most and a relevant document misjudged then
    is rarely looked at again (BENCHMARKS.md 19 compares this rule with the window's straddle of the top-k cutoff,
    which spent half the tokens for half the gain)."""
    import numpy as np  # not at the CLI's start

    out = []
    for g in groups:
        g = list(g)
        if not g:
            out.append(0.0)
            continue
        prior_g = prior[g]
        share = np.divide(sigma[g], prior_g, out=np.ones(len(g)), where=prior_g > 0)
        out.append(float(min(1.0, np.max(share))))
    return tuple(out)


@dataclass(frozen=True)
class ThinkingGate:
    """``--thinking gated``: a window thinks when its measure (:func:`unsettled`) is at
    least ``think_above`` and, under a per-query budget, while the budget lasts: the step's windows ranked by their
    measure (ties: the step's own order, its most promising window first) and taken from the top. ``share``: at every
    step, the windows that have thought are at most this share of the windows sent so far (this step's included);
    ``tokens``: the query's thought tokens, each thinking window counted at ``cost`` (the most its thought may take),
    never more than the budget."""

    think_above: float = DEFAULT_THINK_ABOVE
    share: float | None = None
    tokens: int | None = None
    cost: int = 0

    def check(self, strategy: Any) -> None:
        """Gated thinking needs a method that knows how uncertain each window is (refused before anything loads)."""
        if not strategy.knows_uncertainty:
            raise OptionError(f"{{thinking}} lets a method's uncertainty decide which windows think: method "
                              f"{OptionError.literal(repr(strategy.name))} has none (use the acurank family or "
                              "acurank-auto, or {other})", thinking=("--thinking", "gated"),
                              other={"api": "thinking='on' or 'off'", "cli": "--thinking on|off"})

    def apply(self, step: Step, tally: CallTally) -> Step:
        """The step as it is sent: each window's decision (``Step.think``) from its measure (``Step.unsettled``) and
        what the query has spent (``tally``: every answer of its earlier steps is in). A step with no windows, or
        from a method that measured nothing, is sent as it is."""
        if not step.windows or step.unsettled is None:
            return step
        think = self.decide(step.unsettled(), tuple(len(w) for w in step.windows), tally.calls, tally.thinking_calls,
                            tally.reasoning_tokens)
        return dataclasses.replace(step, think=think)

    def decide(self, measures: tuple[float, ...], sizes: tuple[int, ...] | None = None, sent: int = 0,
               thought: int = 0, spent: int = 0) -> tuple[bool, ...]:
        """Which of a step's windows think. ``sizes``: each window's size (a window of one is never sent, and never
        thinks); ``sent``, ``thought``, ``spent``: the query's windows sent, windows that thought, and thought tokens
        spent before this step."""
        sizes = sizes or (2,) * len(measures)
        eligible = [i for i, m in enumerate(measures) if m >= self.think_above and sizes[i] >= 2]
        allowed = len(eligible)
        if self.share is not None:
            now = sum(1 for n in sizes if n >= 2)
            allowed = min(allowed, int(math.floor(self.share * (sent + now) + 1e-9)) - thought)
        if self.tokens is not None:
            allowed = min(allowed, (self.tokens - spent) // max(1, self.cost))
        chosen = set(sorted(eligible, key=lambda i: (-measures[i], i))[:max(0, allowed)])
        return tuple(i in chosen for i in range(len(measures)))


__all__ = ["DEFAULT_THINK_ABOVE", "ThinkingGate", "unsettled"]
