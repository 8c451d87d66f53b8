"""Live view on stderr: a bar over queries and, for AcuRank, the uncertain-set size |C| per iteration."""

from __future__ import annotations

import sys

from rich.table import Column
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..records import RankingTask, Step, StopReason
from ..console import text_console


class ProgressView:
    """A rich progress bar on stderr; silent when stderr is not a terminal or with ``--quiet``."""

    def __init__(self, total: int, label: str, quiet: bool = False):
        self.console = text_console(stderr=True)
        self.enabled = not quiet and sys.stderr.isatty()
        columns = (
            TextColumn("{task.description}", style="bold", markup=False,
                       table_column=Column(no_wrap=True, overflow="ellipsis", max_width=24)),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn(
                "{task.fields[detail]}", markup=False,
                table_column=Column(no_wrap=True, overflow="ellipsis", min_width=10, ratio=1),
            ),
        )
        self._progress = Progress(
            *columns,
            console=self.console,
            transient=False,
            expand=True,  # the last column takes what the others leave (ratio), and is cut there, not them
            disable=not self.enabled,
            # the ETA from the mean time per query so far (rich's default 30 s window empties between
            # slow queries, and the ETA flipped to -:--:--)
            speed_estimate_period=7 * 24 * 3600.0,
        )
        self._task = self._progress.add_task(label, total=total, detail="")
        self._history: dict[str, list[int]] = {}
        self._label = label
        self._totals = ""  # calls and rounds per finished query, queries capped: after the current step
        self._now = ""  # the step being sent
        self.calls = 0  # windows sent so far (>= 2 documents each)

    def __enter__(self) -> "ProgressView":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def on_step(self, task: RankingTask, step: Step) -> None:
        """Show the step as it is sent: for AcuRank the trail of |C| sizes first (``|C| 31>24>12``), calls so far."""
        self.calls += sum(len(w) >= 2 for w in step.windows)
        if step.uncertain is not None:
            trail = self._history.setdefault(task.qid, [])
            trail.append(step.uncertain)
            shown = ">".join(str(c) for c in trail[-8:])
            self._detail(f"|C| {shown}; q {task.qid} it {step.iteration}; {self.calls} calls")
        elif step.windows:
            self._detail(f"q {task.qid} {step.phase} {step.iteration} ({len(step.windows)} windows); {self.calls} calls")

    def _detail(self, now: str) -> None:
        """The last column (cut with an ellipsis on a narrow terminal, after the bar, count and ETA have their
        room): what is being sent (for AcuRank the |C| trail) first, then the finished queries' means."""
        self._now = now or self._now
        self._progress.update(self._task, detail=" | ".join(x for x in (self._now, self._totals) if x))

    def query_done(self, qid: str, totals=None) -> None:
        """Advance the bar by one query; the running count of stop reasons goes in the label."""
        self._history.pop(qid, None)
        if totals is not None and totals.queries:
            q = totals.queries
            parts = [f"{totals.calls / q:.1f} calls/q", f"{totals.rounds / q:.1f} rounds/q"]
            if totals.thought:
                parts.append(f"{totals.reasoning_tokens / q:.0f} thinking tokens/q")
            if totals.thoughts_cut:
                parts.append(f"thought cut {totals.thoughts_cut}")
            if getattr(totals, "money", None) is not None:  # --price-in/--price-out: what the calls cost so far
                parts.append(f"money {totals.money:.4f}")
            if totals.stops:
                capped = sum(v for k, v in totals.stops.items() if StopReason(k).capped)
                parts.append(f"capped {capped}/{q}")
            self._totals = ", ".join(parts)
            self._detail("")
        self._progress.advance(self._task)
