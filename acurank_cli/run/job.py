"""A rerank job: inputs -> pipeline (strategy, backend, call cache) -> driver -> append-only outputs,
with a summary line. The command line's ``rerank`` and ``baseline`` build one :class:`RerankJob`."""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Iterable

from rich.console import Console


from ..errors import InputError, Stopped
from ..io.run_files import RunFiles, RunWriter
from ..io.line_records import trace_line
from ..method.strategy import Strategy
from ..records import (CallTally, ParseStatus, QueryOutcome, RankingTask, RunAbout, Step, StopReason,
                       TraceRecord)
from . import pipeline
from .. import signals
from . import provenance
from .fingerprint import RunFingerprint, fingerprint_of
from .inputs import InputSpec
from .dry_run import DryRun
from .money import Cap, Prices, call_bound, spent_before
from .passages import Passages
from .preflight import preflight
from ..rerankers.listwise.reranker import first_window_fit
from .driver import task_scores
from ..relevance import Calibrate, Pivot, Relevance
from ..relevance.shift import by_query, columns
from .. import relevance as rel
from .finished import Finisher
from .progress import ProgressView
from ..signals import Interrupted


@dataclass(frozen=True)
class RerankJob:
    """Everything one ``acurank rerank`` invocation needs: what to read, what to run, where to write."""

    inputs: InputSpec
    strategy: Strategy
    backend: str
    outputs: RunFiles = RunFiles()
    backend_options: dict[str, Any] = field(default_factory=dict)
    cache: str | None = pipeline.DEFAULTS.cache
    batch_queries: int | None = pipeline.DEFAULTS.batch_queries
    quiet: bool = False
    #: the model's parameter count for the FLOPs estimate (--model-params); None: the backend's own count
    model_params: float | None = None
    #: where windows run (--ray, --actors, --gpus-per-actor), or None: in this process
    ray: Any = None
    #: long documents by their passages (--passages, --passage-score, --max-passages), or None: documents whole
    passages: Passages | None = None
    #: P(relevant) from a calibration map, the cut and the score column (--calibration, --cut, --score), or None
    relevance: Relevance | None = None
    #: fit a calibration map on this run's judged queries (--calibrate QRELS --calibration FILE), or None
    calibrate: Calibrate | None = None
    #: a reference player in every window (--pivot; the strategy is already pivoted), or None
    pivot: Pivot | None = None
    #: --dry-run: check, call no model, print the bill (:mod:`.dry_run`), or None: run
    dry_run: DryRun | None = None
    #: --allow-map-mismatch: apply --calibration with another reranker or method, or to its own fitting queries
    allow_map_mismatch: bool = False
    #: --price-in/--price-out (money in the stats and the summary), or None
    prices: Prices | None = None
    #: --max-cost: a query-set budget in money (:mod:`.money`), or None
    max_cost: float | None = None


@dataclass
class _Totals(CallTally):
    """Accounting over the whole job: the per-query tallies plus the number of queries."""

    queries: int = 0
    stops: dict = field(default_factory=dict)  # stop reason -> queries
    #: --passages: passages ranked, documents split, and documents capped (more passages than --max-passages: only
    #: their first ones ranked), over the queries (None: documents ranked whole)
    passages: tuple[int, int, int] | None = None
    #: with prices: what the queries' calls cost (None: no prices); --max-cost: the queries it left unstarted
    money: float | None = None
    left: int = 0
    #: --max-cost: the queries that cost more than their bound (:attr:`~.money.Cap.over`), and the least cap that
    #: starts the first query left (:attr:`~.money.Cap.least`)
    over: int = 0
    least: float | None = None

    def add(self, outcome: QueryOutcome) -> None:
        self.queries += 1
        if outcome.passages is not None:
            ranked, split, capped = self.passages or (0, 0, 0)
            self.passages = (ranked + outcome.passages.ranked, split + outcome.passages.split,
                             capped + outcome.passages.capped)
        self.merge(outcome.tally)
        if outcome.stop is not None:
            self.stops[outcome.stop] = self.stops.get(outcome.stop, 0) + 1


def run_job(job: RerankJob, err: Console) -> _Totals:
    """Run the job; returns totals (also printed as one summary line on stderr).

    Everything is checked before the first model call: output paths, every input, every score
    under the method's rating init (:func:`~.preflight.preflight`), and (on resume) that the run was made with the
    same settings. A job with ``--dry-run`` is :func:`~.dry_run.run_dry`'s.
    """
    if job.dry_run is not None:
        raise ValueError("a --dry-run job is run_dry's: it bills the run, run_job runs it")
    started = time.perf_counter()
    checked = preflight(job, err)
    session, inputs, shift, status = checked.session, checked.inputs, checked.shift, checked.status
    backend, outputs, fingerprint, per_call = _opened(job, checked, err)
    if shift is not None and shift.shifted:
        err.print(f"acurank: {shift.line()}", markup=False, soft_wrap=True)
    for note in checked.notes:  # about the run: said once it starts (a backend or cache refused says only its error)
        if note.startswith("warning:"):
            err.print(f"acurank: {note}", markup=False, soft_wrap=True)
        else:
            status.print(f"acurank: note: {note}", markup=False, soft_wrap=True)
    status.print(f"acurank: {job.strategy.name} with reranker {backend.name} on {len(inputs.tasks)} queries", markup=False)
    features: list = _fitted_so_far(job, outputs) if job.calibrate is not None else []
    signals = by_query(inputs.tasks) if job.calibrate is not None else {}  # the fit records its queries' (read now)
    running = _Running(job, session, outputs, inputs, status=status, err=err, features=features, per_call=per_call,
                       shift=shift)
    totals = _drive(running, backend, fingerprint)
    if job.calibrate is not None:  # in input order, however many invocations finished them: one fit, one map
        place = {qid: i for i, qid in enumerate(inputs.expected)}
        features.sort(key=lambda f: place.get(f[0], len(place)))
        _fit(job.calibrate, checked.judged, features, job, backend, status, signals=signals)
    _summary(status, job, totals, time.perf_counter() - started, inputs)
    _warned(err, job, totals, inputs)
    return totals


def _why_left(t: _Totals) -> str:
    """Why the cap left queries unstarted, and the least cap a rerun needs to start the next (rounded up to what
    the summary shows of money)."""
    if t.over or t.least is None:  # the cap names no least one once a query cost past its bound (Cap.least)
        return "a query cost more than its bound: see the warning"
    least = math.ceil(t.least * 1e4 - 1e-6) / 1e4
    return (f"what is spent and the next one's bound would pass it; rerun with --max-cost {least:.4f} or more to "
            "start it")


def _warned(err: Console, job: RerankJob, totals: _Totals, inputs) -> None:
    """The warnings said after the summary: the inputs skipped (under --quiet; the summary says them otherwise), and
    thoughts cut by --max-cost's cap on each completion (each such window kept its order: the run asked nothing)."""
    if job.quiet and (inputs.skipped_docs or inputs.skipped_queries):
        err.print(f"acurank: warning: {_skipped(inputs)}", markup=False)
    if job.max_cost is None:
        return
    cut = totals.parse_counts.get(ParseStatus.thought_cut, 0)
    if cut:
        err.print(f"acurank: warning: --max-cost caps each completion at what its bound reserved, and {cut} of the "
                  f"{totals.calls} calls were a thought cut there (the window kept "
                  "its order): a model that thinks unasked wants --thinking off, one that thinks a larger "
                  "--thinking-budget", markup=False, soft_wrap=True)
    truncated = totals.parse_counts.get(ParseStatus.truncated, 0)
    if truncated:  # a thought the template opened, unseen here, reads as an answer cut short
        err.print(f"acurank: warning: --max-cost caps each completion at what its bound reserved, and {truncated} of "
                  f"the {totals.calls} answers were cut there and read as far as they went (a model whose chat "
                  "template opens its thought: name it with --tokenizer, so that its thought is known)", markup=False,
                  soft_wrap=True)
    if totals.over:
        err.print(f"acurank: warning: --max-cost: {totals.over} queries cost more than their bound (the server "
                  "reported more tokens than a call may take: it ignores max_tokens, or counts a prompt otherwise "
                  "than the backend's tokenizer), so no query started after the first of them; the cap may be "
                  "passed by the queries then in flight", markup=False, soft_wrap=True)


def _resuming(job: RerankJob, backend_cached: bool, outputs: RunWriter, inputs, status: Console, err: Console
              ) -> bool:
    """Say where the outputs stand (the stats file, a resume, finished queries without stats) and whether the
    finished queries are replayed: a method whose queries advance together (lockstep) runs them again, their calls
    from the call cache, and writes only the others."""
    files, done = job.outputs, outputs.done
    if files.stats_path() and files.stats is None:
        status.print(f"acurank: per-query stats go to {files.stats_path()}", markup=False)
    if outputs.without_stats:
        err.print(f"acurank: warning: {len(outputs.without_stats)} finished queries of {files.output} have no record "
                  f"in {files.stats_path()} (e.g. {outputs.without_stats[0]}: the stats file was cut or deleted): they "
                  "are reranked again" + (", their calls from the call cache" if job.cache else ""), markup=False,
                  soft_wrap=True)
    if outputs.without_trace:
        err.print(f"acurank: warning: {len(outputs.without_trace)} finished queries of {files.output} are not whole "
                  f"in {files.trace} (e.g. {outputs.without_trace[0]}: the trace was cut or deleted): they are "
                  "reranked again" + (", their calls from the call cache" if job.cache else ""), markup=False,
                  soft_wrap=True)
    if done:
        status.print(f"acurank: resuming {files.output}: {len(done)} of {len(inputs.expected)} queries already done",
                     markup=False)
    replay = job.strategy.lockstep and bool(done)
    if replay:  # the queries advance together: the finished ones are replayed, not rewritten
        if job.cache is None and backend_cached:
            raise InputError(f"resuming a {job.strategy.name} run replays its finished calls from the call cache "
                             "(its queries advance together); drop --no-cache (or start afresh with --overwrite)")
        status.print(f"acurank: {job.strategy.name}: the finished queries are replayed (their calls from the call "
                     "cache) so that every query sees the same run as before", markup=False)
    return replay


def _fitted_so_far(job: RerankJob, outputs: RunWriter) -> list:
    """--calibrate resumed: the finished queries' features, as their stats records keep them (a query whose record
    lacks them, written before they were kept, cannot be fit on: refused, naming the remedy)."""
    if not outputs.done:
        return []
    path = job.outputs.stats_path()
    records = {}
    if path and Path(path).is_file():
        from ..io.run_files import read_stats

        records = {qid: r.calibration_features for qid, r in read_stats(path).items()
                   if qid in outputs.done and r.calibration_features is not None}
    missing = sorted(outputs.done - set(records))
    if missing:
        raise InputError(f"--calibrate: {len(missing)} finished queries of {job.outputs.output} have no features in "
                         f"their stats (e.g. {missing[0]}); start afresh with --overwrite (their calls come from the "
                         "call cache)")
    return [(qid, list(rec["docids"]), [tuple(x) for x in rec["x"]]) for qid, rec in records.items()]


def _fit(calibrate: Calibrate, qrels, features: list, job: RerankJob, backend, status: Console, *,
         signals: dict) -> None:
    """Fit the map on the finished queries that ``qrels`` judges and write it (one status line); it records their
    first-stage signals (``signals``, by qid: :mod:`acurank_cli.relevance.shift`), which a run applying it compares
    with its own."""
    rows, labels, queries = [], [], 0
    for qid, docids, xs in features:
        grades = qrels.get(qid)
        if grades is None or not xs:  # not judged, or nothing to fit on (--absolute: a query that made no call)
            continue
        queries += 1
        rows.extend(xs)
        labels.extend(int(grades.get(d, 0) >= calibrate.grade) for d in docids)
    recorded = columns(signals[qid] for qid, _, _ in features if qid in qrels and qid in signals)
    init = getattr(job.strategy.parameters(), "init", None)  # how its ratings started: kept where it is applied
    about = {"queries": queries, "method": job.strategy.name, "k": job.strategy.cutoff,  # redacted by rel.fit
             **({} if init is None else {"init": str(getattr(init, "value", init))}),
             "reranker": backend.name, "backend": job.backend, "run": str(job.inputs.run), "qrels": calibrate.qrels,
             "qids": sorted({qid for qid, _, _ in features if qid in qrels}), "signals": recorded}
    fitted = rel.fit(rows, labels, calibrate.grade, about)
    fitted.save(calibrate.output)
    status.print(f"acurank: calibration map (grade >= {calibrate.grade}) fit on {queries} judged queries, "
                 f"{len(labels)} documents ({sum(labels)} relevant), written to {calibrate.output}", markup=False,
                 soft_wrap=True)


def _opened(job: RerankJob, checked, err: Console) -> tuple:
    """(the backend built, the outputs open, the run's fingerprint, and under --max-cost the most tokens a call can
    take in and out, else None), after the checks that need the backend, each before anything is written: a backend
    that counts no tokens under --max-cost (:func:`~.money.call_bound`), the first window's fit
    (:func:`~acurank_cli.rerankers.listwise.reranker.first_window_fit`), a resume made with other settings; the call
    cache opened before the outputs (one it refuses leaves no run file behind). Whatever is refused closes the
    backend (its model, its server's connections)."""
    session, inputs, plan, status = checked.session, checked.inputs, checked.plan, checked.status
    backend = session.load(context={"qrels": inputs.qrels})  # its call cache checked with the outputs (preflight)
    try:
        for note in backend.notes():
            status.print(f"acurank: {note}", markup=False, soft_wrap=True)
        fingerprint = fingerprint_of(job, backend, inputs, session.needs_texts)
        read = [(n.flag, n.path) for n in plan.reads]
        made = provenance.collect(backend, read if inputs.source != "<stdin>" else [("RUN", "-"), *read])
        described = _described(job, inputs, checked.shift)
        first, texts = _first_as_run(job, inputs)
        per_call = None if job.max_cost is None else call_bound(backend, job.strategy, job.backend)
        said = first_window_fit(backend, job.strategy, first, texts, scores=task_scores)
        if said is not None:
            err.print(f"acurank: warning: {said.cli()}", markup=False, soft_wrap=True)
        job.outputs.check_resume(fingerprint, made)  # a resume refused for other settings makes nothing
        session.start(job.cache, job.batch_queries)
        return backend, job.outputs.open(inputs.expected, fingerprint, described, made), fingerprint, per_call
    except BaseException:
        session.close()
        raise


def _first_as_run(job: RerankJob, inputs) -> tuple[list, Any]:
    """The run's first query and its texts as the method will rank them: by its passages under --passages (the fit
    of a window of passages was not checked: each could be cut to a word in silence)."""
    if not inputs.tasks:
        return [], inputs.docs
    if job.passages is None:
        return [inputs.tasks[0]], inputs.docs
    from .passages import Splitter

    splitter = Splitter(job.passages, lambda task: inputs.docs)
    first = next(iter(splitter.tasks([inputs.tasks[0]])))
    return [first], splitter.passages_of(first)


@dataclass(frozen=True)
class _Running:
    """A started run's parts, as its steps read them: the job, the session, the outputs (open), the inputs, the two
    consoles (``status``: quiet under --quiet) and the calibration features gathered so far (--calibrate)."""

    job: RerankJob
    session: pipeline.Session
    outputs: RunWriter
    inputs: Any
    status: Console
    err: Console
    features: list
    #: --max-cost: the most tokens a call can take, in and out (:func:`~.money.call_bound`); None without it
    per_call: tuple[int, int] | None = None
    #: these queries against the map's fitting queries (each stats record holds it); None: no map, or no comparison
    shift: Any = None


def _drive(running: _Running, backend, fingerprint: RunFingerprint) -> _Totals:
    """Rerank the queries not finished yet (a lockstep method's finished ones replayed), then close the outputs,
    the session and the spooled tasks, whatever happened."""
    job, session, outputs, inputs = running.job, running.session, running.outputs, running.inputs
    status, err = running.status, running.err
    try:
        replay = _resuming(job, backend.cache_identity() is not None, outputs, inputs, status, err)
        about = _about(job, backend, fingerprint, status)
        done = set(outputs.done)
        tasks = inputs.tasks if replay else (t for t in inputs.tasks if t.qid not in done)  # read as the driver asks
        count = len(inputs.tasks) if replay else len(inputs.tasks) - len(done)
        cap = _cap(job, running.per_call, outputs)
        if cap is not None:
            tasks = cap.gate(tasks, count)
        return _rerank(running, tasks, count, done, about, cap=cap)
    finally:
        outputs.close()
        session.close()
        inputs.tasks.close()


def _cap(job: RerankJob, per_call: tuple[int, int] | None, outputs: RunWriter) -> Cap | None:
    """--max-cost: the cap, with what this output's finished queries cost already (a resume continues under it)."""
    if job.max_cost is None:
        return None
    return Cap(job.max_cost, job.prices, job.strategy, per_call,
               spent=spent_before(job.prices, job.outputs.stats_path(), outputs.done))


def _rerank(running: _Running, tasks: Iterable[RankingTask], count: int, done: set[str], about: RunAbout, *,
            cap: Cap | None = None) -> _Totals:
    """Rerank the tasks, each finished query written (run block, stats, trace) as it ends, or under --prior em once
    all have (:class:`~.finished.Finisher`); a stop (an input error, an interruption) says its one line and raises
    :class:`Stopped`, the finished work kept."""
    job, session, outputs, inputs = running.job, running.session, running.outputs, running.inputs
    files = job.outputs
    traces: dict[str, list[dict]] = {}
    totals = _Totals()
    with ProgressView(count, job.strategy.name, quiet=job.quiet) as view:

        def on_step(task: RankingTask, step: Step) -> None:
            view.on_step(task, step)
            if files.trace and step.snapshot is not None:
                traces.setdefault(task.qid, []).append(trace_line(TraceRecord.of(task.qid, job.strategy.name, step)))

        def settle(outcome: QueryOutcome) -> float | None:
            """A finished query's cost (its reservation released) and progress; its money (None: no prices, or
            calls that counted no token)."""
            money = None if job.prices is None else (
                cap.finished(outcome) if cap is not None else job.prices.of_tally(outcome.tally))
            if money is not None:
                money = round(money, 6)
                totals.money = (totals.money or 0.0) + money
            totals.add(outcome)
            view.query_done(outcome.qid, totals)
            return money

        finisher = Finisher.of(running, about, traces, settle)
        try:
            for outcome in session.run(tasks, inputs.docs, on_step):
                if outcome.qid in done:
                    continue  # replayed (set budget): already written
                finisher.done(outcome)
                signals.check()  # the query is on disk (or held); a signal that could not be raised ends the run here
            signals.check()
            finisher.flush()
            if cap is not None:
                totals.left, totals.over, totals.least = cap.left, len(cap.over), cap.least
        except BaseException as exc:
            signum = signals.received()
            if isinstance(exc, (InputError, Interrupted, KeyboardInterrupt)) or signum is not None:
                _stopped(running.err, job, outputs, exc, signum)
                if signum is not None:  # a library's error raised by the interruption counts as the signal
                    raise Stopped(128 + signum) from None
                raise Stopped(130 if isinstance(exc, KeyboardInterrupt) else getattr(exc, "exit_code", 2)) from None
            raise
    return totals


def _about(job: RerankJob, backend, fingerprint: RunFingerprint, status: Console) -> RunAbout:
    """What every stats record says about the run (and the FLOPs line when the model's size is known)."""
    about = RunAbout(fingerprint.command_digest, fingerprint.reranker, fingerprint.params,
                     job.model_params if job.model_params is not None else backend.parameters())
    if about.parameters is not None:
        source = "--model-params" if job.model_params is not None else "the model"
        status.print(f"acurank: FLOPs estimated per query as 2 x {about.parameters:.4g} parameters ({source}) x "
                     "(input + output tokens)", markup=False)
    return about


def _skipped(inputs) -> str:
    """What --skip-missing skipped, and how many of the docs are still in the output (below the reranked ones)."""
    held = f" ({inputs.held_docs} of them in the output below the reranked ones)" if inputs.held_docs else ""
    return f"skipped {inputs.skipped_queries} queries, {inputs.skipped_docs} docs without text{held}"


def _described(job: RerankJob, inputs, shift=None) -> dict | None:
    """More for the meta file: a shard's place and the unsharded input's query order (what a merge restores); the
    comparison of these queries with the calibration map's (``shift``, where the map recorded its signals)."""
    out: dict = {}
    shard = job.inputs.shard
    if shard is not None:
        out["shard"] = {"index": shard.index, "of": shard.of, "queries": list(inputs.every_query)}
    if shift is not None:
        out["calibration_shift"] = shift.as_dict()
    return out or None


def _stopped(err: Console, job: RerankJob, outputs: RunWriter, exc: BaseException, signum: int | None) -> None:
    """One line: why the job stopped, how many queries are finished and where they are."""
    done = len(outputs.done)
    if signum is not None or isinstance(exc, KeyboardInterrupt):
        what = f"interrupted ({signal.Signals(signum).name})" if signum else "interrupted"
    else:  # the error and where the finished work is, in one line (not printed again by the CLI)
        what = f"error: {exc.cli() if isinstance(exc, InputError) else exc}"
    if job.outputs.to_file:
        cached = " (finished model calls are in the call cache)" if job.cache else ""
        where = f"{done} finished queries are in {job.outputs.output}; rerun the same command to resume{cached}"
    else:
        shown = job.outputs.output if job.outputs.output not in (None, "-") else "stdout"
        where = f"{done} finished queries were written to {shown}; give --output FILE to make a run resumable"
    err.print(f"acurank: {what}; {where}", markup=False, soft_wrap=True)


def _summary(err: Console, job: RerankJob, t: _Totals, wall: float, inputs) -> None:
    q = max(t.queries, 1)
    parts = [
        f"{t.queries} queries reranked with {job.strategy.name}",
        f"{t.calls / q:.2f} calls/query ({t.calls} calls, {t.calls - t.cached_calls} to the model, {t.cached_calls} cached)",
        f"{t.docs_sent / q:.1f} docs sent/query",
        f"{t.rounds / q:.2f} rounds/query",
    ]
    if t.input_tokens or t.output_tokens:
        parts.append(f"tokens in {t.input_tokens} out {t.output_tokens}")
    if t.thought:
        parts.append(f"thinking {t.thinking_calls} calls, {t.reasoning_tokens} tokens")
    if len(t.endpoints) > 1:
        parts.append("served by " + ", ".join(f"{k} {v}" for k, v in t.endpoints.items()))
    if t.parse_counts and set(t.parse_counts) != {ParseStatus.ok}:
        parts.append("parse " + " ".join(f"{k} {v}" for k, v in sorted(t.parse_counts.items())))
    if t.stops:
        parts.append("stopped by " + ", ".join(f"{StopReason(k)} {v}" for k, v in sorted(t.stops.items(), key=lambda kv: -kv[1])))
    if t.passages is not None:
        parts.append(f"{t.passages[1]} documents split, {t.passages[0] / q:.1f} passages ranked/query")
        if t.passages[2] and job.passages is not None:  # the words past the cap were never read: said, not only in stats
            last = job.passages.stride * (job.passages.max_per_doc - 1) + job.passages.words
            parts.append(f"{t.passages[2]} documents capped at --max-passages {job.passages.max_per_doc} (words "
                         f"past {last} not read; a larger --max-passages reads them)")
    if t.money is not None:
        parts.append(f"money {t.money:.4f} (a million tokens in {job.prices.per_million_in:g}, out "
                     f"{job.prices.per_million_out:g})")
    elif job.prices is not None and t.calls:  # as the dry run's bill says it
        parts.append("no money: the reranker counted no tokens (a listwise LLM counts them; the simulated reranker "
                     "with --sim-tokens)")
    if job.max_cost is not None:
        parts.append(f"--max-cost {job.max_cost:g}: " + (
            f"{t.left} queries left unstarted (" + _why_left(t) + ")" if t.left else "every query started within it"))
    if inputs.skipped_docs or inputs.skipped_queries:
        parts.append(_skipped(inputs))
    parts.append(f"{wall:.1f} s wall")
    err.print("acurank: " + "; ".join(parts), markup=False, soft_wrap=True)
