"""Options shared by several commands, declared once (``Annotated`` types), and the one stderr console.

Nothing here imports numpy: the CLI parses its flags and prints its help before any work starts.
``-m`` is ``--measure`` everywhere (as trec_eval's ``-m``); the window size m is ``--window``.
"""

from __future__ import annotations

import inspect
import typing
from functools import lru_cache
from typing import Annotated, Callable, List, Optional

import typer

from ..report.render import Format


@lru_cache(maxsize=1)
def err():
    """The one console for status and error lines (stderr; no markup, no emoji codes, no highlighting, no
    wrapping): file names, ids, queries and passages are printed as they are (``:fire:`` stays ``:fire:``)."""
    from ..console import text_console

    return text_console(stderr=True, soft_wrap=True)


def say(message: str) -> None:
    """One ``acurank: ...`` line on stderr."""
    err().print(f"acurank: {message}", markup=False, soft_wrap=True)


MEASURE_HELP = ("a trec_eval name (ndcg_cut.10, map, recall.100, P.10, recip_rank, ndcg) or an ir_measures name "
                "(nDCG@10, AP, RR, R@100, P@10)")

Measures = Annotated[List[str], typer.Option("--measure", "-m", help=f"Measure, repeatable: {MEASURE_HELP}.")]
RelLevel = Annotated[int, typer.Option("--rel-level", "-l", help="Relevance level for binary measures (TREC DL uses 2), as trec_eval -l.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", metavar="", help="Replace output files that exist (without it, an existing output is refused).")]
Qids = Annotated[Optional[str], typer.Option("--qids", help="Only these queries: ids 1,2,3 (any number), or @FILE (first column: a qid list or topics; a plain FILE that exists works too).")]


def format_option(allowed: tuple[Format, ...], note: str = "") -> object:
    """``--format/-f`` for ``Annotated``, naming the formats a command renders (one Format enum for every command)."""
    shown = " | ".join(f.value for f in allowed)
    return typer.Option("--format", "-f", help=f"Output format: {shown}{note}.")


def resolved_parameters(command: Callable) -> list[inspect.Parameter]:
    """``command``'s parameters with their annotations resolved (the ``Annotated`` flags; a module with
    ``from __future__ import annotations`` holds them as strings)."""
    hints = typing.get_type_hints(command, include_extras=True)
    return [p.replace(annotation=hints.get(p.name, p.annotation)) for p in inspect.signature(command).parameters.values()]


def declared(function: Callable, params: list[inspect.Parameter], doc: str | None = None) -> Callable:
    """``function`` as Typer will read it: with the parameters ``params`` (their annotations the ``Annotated``
    flags). The one place the CLI rewrites a command's signature: the generated method and backend flags,
    ``baseline``'s --method, report's run-naming options."""
    function.__signature__ = inspect.Signature(params)
    function.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not p.empty}
    if doc is not None:
        function.__doc__ = doc
    return function
