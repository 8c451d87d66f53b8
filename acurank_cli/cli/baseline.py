"""``acurank baseline``: ``rerank`` with a baseline method (sw-x, tourrank-x, ts-..., blitz-kW), its help showing only
the baselines' method options."""

from __future__ import annotations

import inspect

import typer

from ..run.pipeline import DEFAULTS
from .flags import PanelledCommand, declared, method_option, with_generated_flags
from .rerank import rerank


def baseline_command():
    """``baseline``: ``rerank`` with the baselines' method options, and a --method help and default that name
    only the baselines."""
    command = with_generated_flags(rerank, baseline_only=True)
    method = method_option(f"Baseline (default {DEFAULTS.baseline}): {{baselines}}.")
    return declared(command, [p.replace(annotation=method) if p.name == "method" else p
                              for p in inspect.signature(command).parameters.values()])


def mount(app: typer.Typer) -> None:
    app.command("baseline", cls=PanelledCommand,
                help="Rerank a run with a baseline: sw-x, tourrank-x, ts-c1-c2-..., blitz-kW (default sw-1).")(
        baseline_command())
