"""``acurank merge``: the parts of a sharded rerank or baseline (``--shard I/N``) joined into one run and its stats."""

from __future__ import annotations

from typing import Annotated

import typer

from .flags import Overwrite, say


def merge(
    parts: Annotated[list[str], typer.Argument(help="The parts: runs made with --shard 1/N ... N/N (their stats files beside them are joined too).")],
    output: Annotated[str, typer.Option("--output", "-o", help="The joined run (its stats beside it: X.stats.jsonl).")],
    overwrite: Overwrite = False,
) -> None:
    """Join the parts of a sharded rerank/baseline into the run (and stats) the unsharded command writes."""
    from ..io.shards import merge as join

    queries, count = join(parts, output, overwrite)
    say(f"merged {count} shards: {queries} queries -> {output}")


def mount(app: typer.Typer) -> None:
    app.command("merge", help="Join the parts of a sharded run (--shard I/N) into one run and its stats.")(merge)
