"""``acurank prompt render``: the prompts of a query's first round, as a run would send them, with no model.

A method decides its first round of windows before any answer (AcuRank's first pass, sliding windows' first
window, TourRank's first stage); later rounds depend on the answers, so only the first round can be shown without
a model. Each window becomes the request the driver would send (:func:`~.driver.window_request`), and the backend's
prompt-only form (:meth:`~acurank_cli.rerankers.backend.BackendChoice.prompter`: the builder a run makes, no weights
loaded, no server contacted) builds its prompt and the record ``--log-prompts`` writes before the answer
(:meth:`~acurank_cli.rerankers.listwise.reranker.ListwiseLLM.prompt_record`), so the two cannot differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import InputError
from ..method.strategy import Strategy, first_round
from ..records import Doc, RankingTask
from .driver import task_scores, window_request


@dataclass(frozen=True)
class Rendered:
    """One window's prompt: its place in the first round and the record ``--log-prompts`` writes of it."""

    nth: int  # 1-based, in the first round's order
    windows: int  # windows the first round sends
    record: dict[str, Any]
    #: the messages, and the model text (local models; a chat endpoint's with --tokenizer: through its chat template)
    messages: tuple[dict[str, str], ...]
    text: str | None


def render(strategy: Strategy, task: RankingTask, docs: Mapping[str, Doc], prompter: Any,
           nth: Sequence[int] | None = None) -> list[Rendered]:
    """The prompts of windows ``nth`` (1-based; None: all) of ``task``'s first round under ``strategy``, built by
    ``prompter`` (a backend's prompt-only form)."""
    windows = first_round(strategy, task)
    if not windows:
        raise InputError(f"query {task.qid}: {strategy.name} sends no window (fewer than two candidates)")
    wanted = list(range(1, len(windows) + 1)) if nth is None else list(nth)
    for n in wanted:
        if not 1 <= n <= len(windows):
            raise InputError(f"--nth {n}: query {task.qid}'s first round under {strategy.name} has "
                             f"{len(windows)} window{'s' if len(windows) != 1 else ''} (1-{len(windows)})")
    scores = task_scores(task)
    out = []
    for n in wanted:
        request = window_request(task, windows[n - 1], docs, scores)
        prompt = prompter.prompt(request)
        shows_text = prompter.sends_text or prompter.builder.tokenizer is not None
        out.append(Rendered(nth=n, windows=len(windows), record=prompter.prompt_record(request, prompt),
                            messages=tuple(dict(m) for m in prompt.messages),
                            text=prompt.text if shows_text else None))
    return out


__all__ = ["Rendered", "render"]
