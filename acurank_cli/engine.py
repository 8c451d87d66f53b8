"""A rerank job: inputs -> driver(strategy, reranker) -> append-only outputs, with a summary line."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from .cache import with_cache
from .driver import Driver
from .errors import InputError
from .inputs import load_inputs
from .io.outputs import RunOutputs, stats_path_for
from .io.writers import run_lines, stats_record
from .progress import ProgressView
from .records import CallTally, QueryOutcome, RankingTask, Step
from .rerankers.base import build_reranker, lookup
from .rerankers.listwise import ListwiseLLM
from .strategies.base import Strategy


@dataclass
class RerankJob:
    """Everything one ``acurank rerank`` invocation needs."""

    run: str
    strategy: Strategy
    reranker: str
    output: str | None = None
    overwrite: bool = False
    tag: str = "acurank"
    stats: str | None = None
    trace: str | None = None
    topics: str | None = None
    corpus: str | None = None
    index: str | None = None
    dataset: str | None = None
    qrels: str | None = None
    depth: int = 100
    skip_missing: bool = False
    batch_queries: int = 1
    cache: str | None = "default"
    quiet: bool = False
    reranker_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Totals(CallTally):
    """Accounting over the whole job: the per-query tallies plus the number of queries."""

    queries: int = 0
    stops: dict = field(default_factory=dict)  # stop reason -> queries

    def add(self, outcome: QueryOutcome) -> None:
        self.queries += 1
        self.merge(outcome.tally)
        if outcome.stop is not None:
            self.stops[outcome.stop] = self.stops.get(outcome.stop, 0) + 1


def _doc_fetcher(index: str | None):
    if index is None:
        return None
    from .retrieval.lucene import fetch_docs

    return lambda wanted: fetch_docs(index, wanted)


def run_job(job: RerankJob, err: Console) -> _Totals:
    """Run the job; returns totals (also printed as one summary line on stderr)."""
    started = time.perf_counter()
    if job.output and job.output != "-" and job.output == job.run:
        raise InputError("--output must differ from the input run", job.output)
    needs_texts = lookup(job.reranker)[0].needs_texts
    inputs = load_inputs(
        job.run, job.depth, job.topics, job.corpus, job.qrels, need_texts=needs_texts,
        skip_missing=job.skip_missing, doc_fetcher=_doc_fetcher(job.index), dataset=job.dataset,
    )
    for note in inputs.notes:
        err.print(f"acurank: {note}", markup=False)
    backend = build_reranker(job.reranker, qrels=inputs.qrels, **job.reranker_options)
    if job.reranker_options.get("log_prompts") and not isinstance(backend, ListwiseLLM):
        backend.close()
        raise InputError(f"--log-prompts is for LLM rerankers (hf:, openai:), not {backend.name}")
    for note in backend.notes():
        err.print(f"acurank: {note}", markup=False, soft_wrap=True)
    reranker = with_cache(backend, job.cache)
    err.print(f"acurank: {job.strategy.name} with reranker {backend.name} on {len(inputs.tasks)} queries", markup=False)

    stats = job.stats
    if stats is None and job.output and job.output != "-":
        stats = str(stats_path_for(job.output))
        err.print(f"acurank: per-query stats go to {stats}", markup=False)
    outputs = RunOutputs(job.output, stats, job.trace)
    expected = {t.qid: t.n for t in inputs.tasks}
    done = outputs.open(expected, job.tag, job.overwrite)
    tasks = [t for t in inputs.tasks if t.qid not in done]
    if done:
        err.print(f"acurank: resuming {job.output}: {len(done)} of {len(expected)} queries already done", markup=False)

    traces: dict[str, list[dict]] = {}
    totals = _Totals()
    with ProgressView(len(tasks), job.strategy.name, quiet=job.quiet) as view:

        def on_step(task: RankingTask, step: Step) -> None:
            view.on_step(task, step)
            if job.trace and step.snapshot is not None:
                traces.setdefault(task.qid, []).append(
                    {"qid": task.qid, "method": job.strategy.name, "iteration": step.iteration,
                     "phase": step.phase, **step.snapshot()}
                )

        driver = Driver(job.strategy, reranker, inputs.docs, job.batch_queries, on_step)
        try:
            for outcome in driver.run(tasks):
                outputs.write_query(
                    outcome.qid, run_lines(outcome.qid, outcome.ranking, job.tag),
                    stats_record(outcome), traces.pop(outcome.qid, []),
                )
                totals.add(outcome)
                view.query_done(outcome.qid, totals)
        except (KeyboardInterrupt, InputError) as exc:
            where = job.output if job.output and job.output != "-" else "the output"
            what = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped"
            err.print(f"acurank: {what}; {len(outputs.done)} finished queries are in {where} "
                      "(rerun the same command with --output to resume)", markup=False)
            raise
        finally:
            outputs.close()
            reranker.close()
    wall = time.perf_counter() - started
    _summary(err, job, totals, wall, inputs)
    return totals


def _summary(err: Console, job: RerankJob, t: _Totals, wall: float, inputs) -> None:
    q = max(t.queries, 1)
    parts = [
        f"{job.strategy.name}: {t.queries} queries",
        f"{t.calls / q:.2f} calls/query ({t.calls} calls, {t.calls - t.cached_calls} to the model, {t.cached_calls} cached)",
        f"{t.docs_sent / q:.1f} docs sent/query",
    ]
    if t.input_tokens or t.output_tokens:
        parts.append(f"tokens in {t.input_tokens} out {t.output_tokens}")
    if t.parse_counts and set(t.parse_counts) != {"ok"}:
        parts.append("parse " + " ".join(f"{k} {v}" for k, v in sorted(t.parse_counts.items())))
    if t.stops:
        parts.append("stopped by " + ", ".join(f"{k} {v}" for k, v in sorted(t.stops.items(), key=lambda kv: -kv[1])))
    if inputs.skipped_docs or inputs.skipped_queries:
        parts.append(f"skipped {inputs.skipped_queries} queries, {inputs.skipped_docs} docs without text")
    parts.append(f"{wall:.1f} s wall")
    err.print("acurank: " + "; ".join(parts), markup=False, soft_wrap=True)
