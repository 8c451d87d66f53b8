"""``acurank convert``: a candidate file (RankGPT JSON, AcuRank or RankLLM JSONL) split into the sample_runs layout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..io.plan import FilePlan
from ..io.sources import check_tag
from ..retrieval.resolve import as_file, load_qrels
from ..run.pipeline import DEFAULTS
from .flags import DEPTH_HELP, Overwrite, err


def convert_cmd(
    candidates: Annotated[str, typer.Argument(help="Candidate file: RankGPT JSON, AcuRank JSONL or RankLLM JSONL.")],
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Folder for bm25.run, topics.tsv, passages.jsonl.gz (+ qrels.txt).")],
    qrels: Annotated[str | None, typer.Option("--qrels", help="Keep only queries judged in these qrels and copy them.")] = None,
    tag: Annotated[str, typer.Option("--tag", help="Run tag.")] = "bm25",
    depth: Annotated[int, typer.Option("--depth", help=DEPTH_HELP["convert"])] = DEFAULTS.depth,
    overwrite: Overwrite = False,
) -> None:
    """Split a candidate file into run + topics + corpus (the sample_runs layout)."""
    from ..io.convert import LAYOUT, convert_candidates

    plan = FilePlan().read("CANDIDATES", candidates).read("--qrels", None if qrels is None else as_file(qrels))
    for name in LAYOUT:
        plan.write(f"(--out-dir's {name})", out_dir / name)
    plan.check(overwrite)
    done = convert_candidates(candidates, out_dir, load_qrels(qrels) if qrels else None, check_tag(tag), depth)
    err().print(f"{done.fmt}: {done.queries} queries, {done.passages} passages -> {out_dir}", markup=False)


def mount(app: typer.Typer) -> None:
    app.command("convert", help="Split a candidate file into run + topics + corpus (the sample_runs layout).")(convert_cmd)
