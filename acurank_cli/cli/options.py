"""Options shared by several commands, declared once (``Annotated`` types), and the one stderr console.

Nothing here imports numpy: the CLI parses its flags and prints its help before any work starts.
``-m`` is ``--measure`` everywhere (as trec_eval's ``-m``); the window size m is ``--window``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, List, Optional

import typer

from ..report.render import Format


@lru_cache(maxsize=1)
def err():
    """The one console for status and error lines (stderr; no markup, no highlighting, no wrapping)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def say(message: str) -> None:
    """One ``acurank: ...`` line on stderr."""
    err().print(f"acurank: {message}", markup=False, soft_wrap=True)


MEASURE_HELP = ("a trec_eval name (ndcg_cut.10, map, recall.100, P.10, recip_rank, ndcg) or an ir_measures name "
                "(nDCG@10, AP, RR, R@100, P@10)")

Measures = Annotated[List[str], typer.Option("--measure", "-m", help=f"Measure, repeatable: {MEASURE_HELP}.")]
RelLevel = Annotated[int, typer.Option("--rel-level", "-l", help="Relevance level for binary measures (TREC DL uses 2), as trec_eval -l.")]
Qids = Annotated[Optional[str], typer.Option("--qids", help="Only these queries: ids 1,2,3 (any number), or @FILE (first column: a qid list or topics; a plain FILE that exists works too).")]


def format_option(allowed: tuple[Format, ...], note: str = "") -> object:
    """``--format/-f`` for ``Annotated``, naming the formats a command renders (one Format enum for every command)."""
    shown = " | ".join(f.value for f in allowed)
    return typer.Option("--format", "-f", help=f"Output format: {shown}{note}.")
