"""Options shared by several commands, declared once (``Annotated`` types), and the one stderr console.

Nothing here imports numpy: the CLI parses its flags and prints its help before any work starts.
``-m`` is ``--measure`` everywhere (as trec_eval's ``-m``); the window size m is ``--window``.
"""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Callable, List, Optional, Sequence

import typer

from ..report.render import Format, check_format


@lru_cache(maxsize=1)
def err():
    """The one console for status and error lines (stderr; no markup, no emoji codes, no highlighting, no
    wrapping): file names, ids, queries and passages are printed as they are (``:fire:`` stays ``:fire:``)."""
    from ..console import text_console

    return text_console(stderr=True, soft_wrap=True)


#: --ray, --actors, --gpus-per-actor: declared once for rerank, baseline and serve
RayAddress = Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS", help="Run the windows in Ray actors: local (a cluster for this run), auto (the running cluster) or an address; the driver keeps the cache, outputs and resume. See docs/scale.md.")]
RayActors = Annotated[Optional[int], typer.Option("--actors", min=1, help="--ray: actors, each building the backend once (default: one per GPU of the cluster, else one per CPU).")]
RayGpus = Annotated[Optional[float], typer.Option("--gpus-per-actor", min=0.0, help="--ray: GPUs per actor (default 1 on a cluster with GPUs, else 0).")]


def say(message: str) -> None:
    """One ``acurank: ...`` line on stderr."""
    err().print(f"acurank: {message}", markup=False, soft_wrap=True)


MEASURE_HELP = ("a trec_eval name (ndcg_cut.10, map, recall.100, P.10, recip_rank, ndcg) or an ir_measures name "
                "(nDCG@10, AP, RR, R@100, P@10)")



def measure_option(kind: Any, help: str) -> Any:
    """``--measure/-m`` (``kind``: one name, or a list for a repeatable flag); ``help`` says what it does here,
    ``{names}`` standing for the names it takes."""
    return Annotated[kind, typer.Option("--measure", "-m", help=help.format(names=MEASURE_HELP))]


def rel_level_option(note: str = "") -> Any:
    """``--rel-level/-l``, the relevance level of binary measures."""
    return Annotated[int, typer.Option("--rel-level", "-l", min=1, help=f"Relevance level for binary measures (TREC DL uses 2){note}.")]


Measures = measure_option(List[str], "Measure, repeatable: {names}.")
RelLevel = rel_level_option(", as trec_eval -l")
Overwrite = Annotated[bool, typer.Option("--overwrite", metavar="", help="Replace output files that exist (without it, an existing output is refused).")]
Cache = Annotated[Optional[str], typer.Option("--cache", help="SQLite call cache (default: $ACURANK_CACHE or ~/.cache/acurank/calls.sqlite).")]
NoCache = Annotated[bool, typer.Option("--no-cache", metavar="", help="Do not read or write the call cache.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", metavar="", help="No status lines.")]
Qids = Annotated[Optional[str], typer.Option("--qids", help="Only these queries: ids 1,2,3 (any number), or @FILE (first column: a qid list or topics; a plain FILE that exists works too).")]


def cache_choice(cache: str | None, no_cache: bool) -> str | None:
    """The call cache --cache and --no-cache choose (None: no cache; the default cache when neither is given);
    both at once is refused."""
    from ..errors import InputError
    from ..run.pipeline import DEFAULTS

    if no_cache and cache is not None:
        raise InputError(f"--no-cache and --cache {cache} contradict each other: give one of them")
    return None if no_cache else (cache or DEFAULTS.cache)


def format_option(allowed: tuple[Format, ...], note: str = "") -> object:
    """``--format/-f`` for ``Annotated``, naming the formats a command renders (one Format enum for every command)."""
    shown = " | ".join(f.value for f in allowed)
    return typer.Option("--format", "-f", help=f"Output format: {shown}{note}.")


@dataclass(frozen=True)
class Rendering:
    """Where and how a command shows its :class:`~acurank_cli.report.render.Report`: the format chosen (checked
    before any work), ``--output`` (None: stdout) and ``--overwrite``."""

    fmt: Format
    output: Path | None
    overwrite: bool

    def emit(self, report) -> None:
        """Render the report, then say which other files the command wrote (its plots)."""
        report.emit(self.fmt, self.output)
        if report.written:
            say("wrote " + ", ".join(str(p) for p in report.written))


def renders(formats: Sequence[Format], default: str | None = "terminal", note: str = "",
            output_help: str = "Write the table/JSON here instead of stdout."):
    """Give ``command(..., out: Rendering, ...)`` the flags ``--format/-f``, ``--output/-o`` and ``--overwrite``,
    declared here once for every command that renders, in the place of its ``out`` parameter; the format is
    checked before the command runs (``default`` None: terminal on a terminal, tsv otherwise)."""

    def wrap(command: Callable) -> Callable:
        fmt_kind = Optional[str] if default is None else str
        flags = [("fmt", Annotated[fmt_kind, format_option(formats, note)], default),
                 ("output", Annotated[Optional[Path], typer.Option("--output", "-o", help=output_help)], None),
                 ("overwrite", Overwrite, False)]
        params = []
        for p in resolved_parameters(command):
            if p.name != "out":
                params.append(p)
                continue
            params += [inspect.Parameter(name, p.kind, annotation=kind, default=value) for name, kind, value in flags]

        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            fmt, output, overwrite = (kwargs.pop(name) for name, _, _ in flags)
            chosen = check_format(fmt, formats) if fmt else (Format.terminal if sys.stdout.isatty() else Format.tsv)
            return command(*args, out=Rendering(chosen, output, overwrite), **kwargs)

        return declared(wrapper, params)

    return wrap


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
