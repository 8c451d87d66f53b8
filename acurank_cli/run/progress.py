"""Live view on stderr: a bar over queries and, for AcuRank, the uncertain-set size |C| per iteration."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Column
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..records import RankingTask, Step, StopReason


class ProgressView:
    """A rich progress bar on stderr; silent when stderr is not a terminal or with ``--quiet``."""

    def __init__(self, total: int, label: str, quiet: bool = False):
        self.console = Console(stderr=True)
        self.enabled = not quiet and sys.stderr.isatty()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn(
                "{task.fields[detail]}",
                table_column=Column(no_wrap=True, overflow="ellipsis", min_width=10, ratio=1),
            ),
            console=self.console,
            transient=False,
            disable=not self.enabled,
            # the ETA from the mean time per query so far (rich's default 30 s window empties between
            # slow queries, and the ETA flipped to -:--:--)
            speed_estimate_period=7 * 24 * 3600.0,
        )
        self._task = self._progress.add_task(label, total=total, detail="")
        self._history: dict[str, list[int]] = {}
        self._label = label
        self.calls = 0  # windows sent so far (>= 2 documents each)

    def __enter__(self) -> "ProgressView":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def on_step(self, task: RankingTask, step: Step) -> None:
        """Show the step as it is sent: calls so far, and for AcuRank the trail of |C| sizes (``|C| 31>24>12``)."""
        self.calls += sum(len(w) >= 2 for w in step.windows)
        if step.uncertain is not None:
            trail = self._history.setdefault(task.qid, [])
            trail.append(step.uncertain)
            shown = ">".join(str(c) for c in trail[-8:])
            self._progress.update(self._task, detail=f"{self.calls} calls; q {task.qid} it {step.iteration} |C| {shown}")
        elif step.windows:
            self._progress.update(self._task, detail=f"{self.calls} calls; q {task.qid} {step.phase} {step.iteration} "
                                                     f"({len(step.windows)} windows)")

    def query_done(self, qid: str, totals=None) -> None:
        """Advance the bar by one query; the running count of stop reasons goes in the label."""
        self._history.pop(qid, None)
        if totals is not None and totals.queries:
            q = totals.queries
            parts = [f"{totals.calls / q:.1f} calls/q", f"{totals.rounds / q:.1f} rounds/q"]
            if totals.stops:
                capped = sum(v for k, v in totals.stops.items() if StopReason(k).capped)
                parts.append(f"capped {capped}/{q}")
            self._progress.update(self._task, description=f"{self._label} ({', '.join(parts)})")
        self._progress.advance(self._task)
