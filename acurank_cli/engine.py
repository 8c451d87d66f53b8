"""A rerank job: inputs -> driver(strategy, reranker) -> append-only outputs, with a summary line."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from .cache import with_cache
from .driver import Driver
from .errors import InputError
from .inputs import load_inputs
from . import signals
from .fingerprint import RunFingerprint, input_digest, strategy_params
from .io.outputs import RunOutputs, check_writable, stats_path_for
from .io.readers import source_name
from .ratings import check_scores
from .signals import Interrupted
from .io.writers import run_lines, stats_record, trace_record
from .progress import ProgressView
from .records import CallTally, QueryOutcome, RankingTask, Step
from .rerankers.base import build_reranker, lookup
from .strategies.base import Strategy, check_tasks


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
    qids: str | None = None
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
    """Run the job; returns totals (also printed as one summary line on stderr).

    Everything is checked before the first model call: output paths, every input, every score
    under the method's rating init, and (on resume) that the run was made with the same settings.
    """
    started = time.perf_counter()
    if job.output and job.output != "-" and job.output == job.run:
        raise InputError("--output must differ from the input run", job.output)
    stats = job.stats
    if stats is None and job.output and job.output != "-":
        stats = str(stats_path_for(job.output))
    for path, what in ((job.output, "--output"), (stats, "--stats"), (job.trace, "--trace"),
                       (job.reranker_options.get("log_prompts"), "--log-prompts")):
        check_writable(path, what)
    spec = lookup(job.reranker)[0]
    spec.make_options(job.reranker_options)  # a flag the backend does not take: one line, before any work
    needs_texts = spec.needs_texts
    inputs = load_inputs(
        job.run, job.depth, job.topics, job.corpus, job.qrels, need_texts=needs_texts,
        skip_missing=job.skip_missing, doc_fetcher=_doc_fetcher(job.index), dataset=job.dataset, qids=job.qids,
    )
    check_scores(inputs.tasks, job.strategy.init, source_name(job.run))
    check_tasks(job.strategy, inputs.tasks)
    for note in inputs.notes:
        err.print(f"acurank: {note}", markup=False)
    options = dict(job.reranker_options)
    if "qrels" in spec.option_names():
        options["qrels"] = inputs.qrels
    backend = build_reranker(job.reranker, **options)
    for note in backend.notes():
        err.print(f"acurank: {note}", markup=False, soft_wrap=True)
    fingerprint = RunFingerprint(
        job.strategy.name, strategy_params(job.strategy), backend.fingerprint(),
        {"digest": input_digest(inputs.tasks, inputs.docs, needs_texts), "queries": len(inputs.tasks),
         "depth": job.depth, "tag": job.tag},
    )
    outputs = RunOutputs(job.output, stats, job.trace)
    expected = {t.qid: t.n for t in inputs.tasks}
    try:
        done = outputs.open(expected, job.tag, job.overwrite, fingerprint)
    except BaseException:
        backend.close()
        raise
    reranker = with_cache(backend, job.cache)
    err.print(f"acurank: {job.strategy.name} with reranker {backend.name} on {len(inputs.tasks)} queries", markup=False)
    if stats and job.stats is None:
        err.print(f"acurank: per-query stats go to {stats}", markup=False)
    tasks = [t for t in inputs.tasks if t.qid not in done]
    if done:
        err.print(f"acurank: resuming {job.output}: {len(done)} of {len(expected)} queries already done", markup=False)
    about = {"fingerprint": fingerprint.digest, "reranker": fingerprint.reranker, "params": fingerprint.params}

    traces: dict[str, list[dict]] = {}
    totals = _Totals()
    with ProgressView(len(tasks), job.strategy.name, quiet=job.quiet) as view:

        def on_step(task: RankingTask, step: Step) -> None:
            view.on_step(task, step)
            if job.trace and step.snapshot is not None:
                traces.setdefault(task.qid, []).append(trace_record(task.qid, job.strategy.name, step))

        driver = Driver(job.strategy, reranker, inputs.docs, job.batch_queries, on_step)
        try:
            for outcome in driver.run(tasks):
                outputs.write_query(
                    outcome.qid, run_lines(outcome.qid, outcome.ranking, job.tag),
                    {**stats_record(outcome), **about}, traces.pop(outcome.qid, []),
                )
                totals.add(outcome)
                view.query_done(outcome.qid, totals)
        except BaseException as exc:
            signum = signals.received()
            if isinstance(exc, (InputError, Interrupted, KeyboardInterrupt)) or signum is not None:
                _stopped(err, job, outputs, exc, signum)
                if signum is not None and not isinstance(exc, Interrupted):
                    exc = Interrupted(signum)  # e.g. a library's error raised by the interruption
                if isinstance(exc, Interrupted):
                    exc.reported = True
                    raise exc from None
            raise
        finally:
            outputs.close()
            reranker.close()
    wall = time.perf_counter() - started
    _summary(err, job, totals, wall, inputs)
    return totals


def _stopped(err: Console, job: RerankJob, outputs: RunOutputs, exc: BaseException, signum: int | None) -> None:
    """One line: why the job stopped, how many queries are finished and where they are."""
    done = len(outputs.done)
    if signum is not None or isinstance(exc, KeyboardInterrupt):
        what = f"interrupted ({signal.Signals(signum).name})" if signum else "interrupted"
    else:  # the error and where the finished work is, in one line (not printed again by the CLI)
        what = f"error: {exc.cli() if isinstance(exc, InputError) else exc}"
        exc.reported = True
    if job.output and job.output != "-":
        cached = " (finished model calls are in the call cache)" if job.cache else ""
        where = f"{done} finished queries are in {job.output}; rerun the same command to resume{cached}"
    else:
        where = f"{done} finished queries were written to stdout; give --output FILE to make a run resumable"
    err.print(f"acurank: {what}; {where}", markup=False, soft_wrap=True)


def _summary(err: Console, job: RerankJob, t: _Totals, wall: float, inputs) -> None:
    q = max(t.queries, 1)
    parts = [
        f"{job.strategy.name}: {t.queries} queries",
        f"{t.calls / q:.2f} calls/query ({t.calls} calls, {t.calls - t.cached_calls} to the model, {t.cached_calls} cached)",
        f"{t.docs_sent / q:.1f} docs sent/query",
        f"{t.rounds / q:.2f} rounds/query",
    ]
    if t.input_tokens or t.output_tokens:
        parts.append(f"tokens in {t.input_tokens} out {t.output_tokens}")
    if len(t.endpoints) > 1:
        parts.append("served by " + ", ".join(f"{k} {v}" for k, v in t.endpoints.items()))
    if t.parse_counts and set(t.parse_counts) != {"ok"}:
        parts.append("parse " + " ".join(f"{k} {v}" for k, v in sorted(t.parse_counts.items())))
    if t.stops:
        parts.append("stopped by " + ", ".join(f"{k} {v}" for k, v in sorted(t.stops.items(), key=lambda kv: -kv[1])))
    if inputs.skipped_docs or inputs.skipped_queries:
        parts.append(f"skipped {inputs.skipped_queries} queries, {inputs.skipped_docs} docs without text")
    parts.append(f"{wall:.1f} s wall")
    err.print("acurank: " + "; ".join(parts), markup=False, soft_wrap=True)
