"""``acurank retrieve``: a first-stage run from a Lucene index (BM25, or learned sparse), the run a rerank starts from.

Flags follow Pyserini's where they overlap (``--index --topics --hits --k1 --b --threads --output``).
Runs go to stdout or ``--output``; status lines go to stderr; bad input raises
:class:`~acurank_cli.errors.InputError` (one line, exit 2 under the ``acurank`` entry point).
Importing this module is cheap: Java starts only when a command runs.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InputError
from ..io.plan import FilePlan, replacing
from ..io.sources import check_tag
from ..retrieval.resolve import as_file
from ..run.pipeline import DEFAULTS
from .flags import DEPTH_HELP, Overwrite, Quiet, status


def _process_age() -> float | None:
    """Seconds since this process started (Linux /proc), to report time from command start."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start, ticks after boot
        return time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def retrieve_cmd(
    *,
    index: Annotated[str, typer.Option("--index", help="Lucene index folder, or a Pyserini prebuilt index name (downloads once).")],
    topics: Annotated[str | None, typer.Option("--topics", help="Topics 'qid<TAB>text' (.gz ok, '-' = stdin), or a Pyserini topic name.")] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Topics from ir_datasets instead: irds:<id> (e.g. irds:beir/scifact/test).")] = None,
    hits: Annotated[int, typer.Option("--hits", help=DEPTH_HELP["retrieve"])] = DEFAULTS.depth,
    k1: Annotated[float, typer.Option("--k1", help="BM25 k1.")] = 0.9,
    b: Annotated[float, typer.Option("--b", help="BM25 b.")] = 0.4,
    threads: Annotated[int, typer.Option("--threads", help="Search threads.")] = 2,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Output TREC run (default stdout).")] = None,
    tag: Annotated[str | None, typer.Option("--tag", "--runtag", help="Run tag (last column; default bm25, or impact with --encoder/--encoded-queries).")] = None,
    encoder: Annotated[str | None, typer.Option("--encoder", help="Learned sparse search: a SPLADE or uniCOIL query encoder, hub id (e.g. naver/splade-cocondenser-ensembledistil, downloads once) or local folder; --index is then an impact index (e.g. msmarco-v1-passage.splade-pp-ed).")] = None,
    encoded_queries: Annotated[str | None, typer.Option("--encoded-queries", help="Learned sparse search with pre-encoded queries: JSONL {qid, vector: {term: integer weight}} (.gz ok); --topics optional (then it picks and orders the queries).")] = None,
    quiet: Quiet = False,
    overwrite: Overwrite = False,
) -> None:
    """BM25 retrieval with Anserini (Lucene via pyjnius; no torch), or learned sparse (impact) retrieval with
    --encoder or --encoded-queries: writes a TREC run."""
    from ..retrieval.jvm import start_jvm

    sparse = encoder is not None or encoded_queries is not None
    if encoder is not None and encoded_queries is not None:
        raise InputError("pass one of --encoder and --encoded-queries")
    if topics is not None and dataset is not None or (topics is None and dataset is None and encoded_queries is None):
        raise InputError("pass exactly one of --topics FILE|NAME and --dataset irds:<id>")
    if hits < 1:
        raise InputError(f"--hits must be at least 1, not {hits}")
    tag = check_tag(tag or ("impact" if sparse else "bm25"))
    FilePlan().read("--topics", None if topics is None else as_file(topics)).read("--encoded-queries", encoded_queries).read(
        "--index", index if Path(index).exists() else None).write("--output", output).check(overwrite)
    queries = _queries(topics, dataset, quiet)
    vectors = None if encoded_queries is None else _encoded(encoded_queries, queries)
    jvm = start_jvm()
    started = time.perf_counter()
    runs, docs, what = _searched(index, queries, vectors, sparse=sparse, encoder=encoder, hits=hits, k1=k1, b=b,
                                 threads=threads, quiet=quiet)
    seconds = time.perf_counter() - started
    age = _process_age()
    _write(runs, output, tag)
    empty = sum(1 for c in runs.values() if not c)
    status(
        f"retrieved {len(runs)} queries x top-{hits} {what} on {index} ({docs} docs) "
        f"in {seconds:.2f} s ({len(runs) / max(seconds, 1e-9):.0f} q/s, {threads} thread(s), Java "
        f"{jvm.java_version} {jvm.source})"
        + (f"; {empty} queries without hits" if empty else "")
        + (f"; results {age:.2f} s after command start" if age is not None else ""),
        quiet,
    )


def _searched(index: str, queries: Any, vectors: Any, *, sparse: bool, encoder: str | None, hits: int, k1: float,
              b: float, threads: int, quiet: bool) -> tuple[Any, int, str]:
    """The search itself: (the runs, the index's document count, what searched), BM25 or impact (``sparse``: the
    queries encoded by ``encoder`` where no ``vectors`` were given)."""
    if sparse:
        from ..retrieval.impact import encode_queries, num_impact_docs, retrieve_impact

        docs = num_impact_docs(index)
        if vectors is None:
            status(f"encoding {len(queries)} queries with {encoder}", quiet)
            vectors = encode_queries(encoder, queries)
        runs = retrieve_impact(index, vectors, hits=hits, threads=threads)
        return runs, docs, f"impact ({'pre-encoded queries' if encoder is None else encoder})"
    from ..retrieval.lucene import num_docs, retrieve

    docs = num_docs(index)
    return retrieve(index, queries, hits=hits, k1=k1, b=b, threads=threads), docs, f"BM25(k1={k1:g}, b={b:g})"


def _queries(topics: str | None, dataset: str | None, quiet: bool) -> dict[str, str] | None:
    """The topics (--topics or --dataset), or None (pre-encoded queries alone); none at all is an error."""
    from ..retrieval.resolve import load_topics

    queries: dict[str, str] | None = None
    if dataset is not None:
        from ..retrieval.datasets import load_irds

        status(f"loading topics of {dataset} (ir_datasets; may download)", quiet)
        queries = load_irds(dataset).topics
    elif topics is not None:
        queries = load_topics(topics)
    if queries is not None and not queries:
        raise InputError("no queries to run", topics or dataset)
    return queries


def _encoded(path: str, queries: dict[str, str] | None) -> dict:
    """--encoded-queries' vectors; with topics, every topic's, in the topics' order."""
    from ..retrieval.impact import read_encoded_queries

    vectors = read_encoded_queries(path)
    if queries is None:
        return vectors
    missing = [q for q in queries if q not in vectors]
    if missing:
        raise InputError(f"no encoded vector for query {missing[0]} ({len(missing)} of {len(queries)} topics lack one)",
                         path)
    return {q: vectors[q] for q in queries}


def _write(runs: dict, output: str | None, tag: str) -> None:
    """The run to stdout, or to a file written whole (a temporary file renamed at the end)."""
    from ..io.writers import write_run

    if output is None or output == "-":
        write_run(sys.stdout, runs, tag)
        sys.stdout.flush()
        return
    with replacing(output) as fh:
        write_run(fh, runs, tag)


def mount(app: typer.Typer) -> None:
    app.command("retrieve", help="BM25 or learned sparse (SPLADE++, uniCOIL) retrieval with pyserini/Anserini; writes a TREC run.")(retrieve_cmd)
