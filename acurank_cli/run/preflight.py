"""What a rerank job checks before its backend is built, the same for the run (:func:`~.job.run_job`) and its dry run
(:func:`~.dry_run.run_dry`): the backend's options (the session made), every output against every input, the
relevance flags and the pivot, every input read, the calibration map's origin and whether these queries are unlike
its own, and every task under the method (the first window's fit, once a backend can build prompts, is
:func:`~acurank_cli.rerankers.listwise.reranker.first_window_fit`'s). Nothing is written and no model is called before
all of it holds (then the outputs' missing folders are made, and with
--overwrite each prompt log restarted). ``job`` is a :class:`~.job.RerankJob` (read here, not
imported: the job imports this module)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from .. import relevance as rel
from ..console import text_console
from ..errors import InputError
from ..io.plan import FilePlan
from ..params import ParameterError, positive
from ..relevance.shift import Shift, compared
from ..rerankers.backends.embeddings import store_path, stores_of
from ..method.strategy import Strategy
from . import pipeline
from .money import check_cap


@dataclass(frozen=True)
class Checked:
    """What the checks leave for the run: the session (options checked, backend not built), the file plan (what the
    job reads), the qrels ``--calibrate`` fits on (None without it), the inputs read, the comparison of these queries
    with the map's (None: no map, or one that recorded none), the notes about the tasks to say once the run starts,
    and the status console (quiet under --quiet)."""

    session: pipeline.Session
    plan: FilePlan
    judged: dict | None
    inputs: Any
    shift: Shift | None
    notes: list
    status: Console


def preflight(job: Any, err: Console) -> Checked:
    """Every check before the backend is built (see the module doc); the inputs' own notes said."""
    session = pipeline.Session(job.strategy, job.backend, job.backend_options, job.ray, job.passages)  # options checked
    plan = _checked_outputs(job, session.choice)
    _checked_relevance(job, session.choice.backend)
    with job.inputs.placing():  # a refusal about one candidate names its line
        inputs = job.inputs.load(session.needs_texts)
    if session.choice.backend.oracle and not inputs.qrels and session.choice.options.qrels is None:
        from ..rerankers.backends.simulated import needs_qrels

        raise needs_qrels()  # the backend's own refusal, before a folder is made or a log restarted
    if session.choice.backend.oracle:
        given = f"--qrels {job.inputs.qrels}" if job.inputs.qrels else "the dataset's qrels"  # said with the notes
        said = pipeline.unjudged(inputs.qrels, (t.qid for t in inputs.tasks), given, "this run's")
        if said is not None:
            inputs.notes.append(f"warning: {said}")
    if job.relevance is not None and job.relevance.prior is not None and len(inputs.tasks) < rel.EM_MIN_QUERIES:
        raise InputError(f"--prior em estimates the share of relevant candidates over the run's queries, and this run "
                         f"has {len(inputs.tasks)}: EM needs at least {rel.EM_MIN_QUERIES} (over 10 or 20 it ran to a "
                         "share of 0 or a third of the truth); apply the map as fit, without --prior")
    judged, shift = _judged(job, inputs)
    if job.cache not in (None, pipeline.DEFAULTS.cache) and "calls" not in session.choice.backend.keeps:
        inputs.notes.append(f"--cache {job.cache} is not used: reranker {job.backend} keeps no calls (it pays for none)")
    if job.pivot is not None:
        job.pivot.add_texts(session.needs_texts, job.backend, list(inputs.expected), inputs.docs)
    with job.inputs.placing():
        notes = session.check(inputs.tasks, inputs.source, docs=inputs.docs,
                              way=rel.zscore_way(job.relevance and job.relevance.calibration, rel.SAID["cli"]))
    if job.ray is None or job.dry_run is not None:  # a run on Ray: its workers' disks, not this one, hold the model
        session.choice.ready()  # what the backend refuses at start with nothing loaded (an API key, a model's files)
    if job.dry_run is None:  # every check held: the first things made (a folder) or restarted (a log, --overwrite)
        plan.make(job.outputs.overwrite)
    status = text_console(stderr=True, quiet=True) if job.quiet else err  # --quiet: errors and warnings only
    for note in inputs.notes:
        (err if note.startswith("warning:") else status).print(f"acurank: {note}", markup=False)
    return Checked(session, plan, judged, inputs, shift=shift, notes=notes, status=status)


def _checked_outputs(job: Any, choice: Any) -> FilePlan:
    """--max-cost, --model-params, --trace and --shard, and every output against every input and every other output
    (see :class:`FilePlan`), checked (nothing made): nothing is opened for writing before this holds. Returns the plan
    (what the job reads). ``choice``: the backend chosen, whose options name files
    (:attr:`~acurank_cli.rerankers.backend.BackendChoice.files`: a template and a few-shot file read, a --log-prompts
    log written; with --overwrite, a log restarts with the run, else it is continued) and which keeps its calls, and
    its embeddings, in the stores at --cache."""
    files = job.outputs
    check_cap(job.strategy, job.prices, job.max_cost)
    if job.model_params is not None and not positive().contains(job.model_params):
        raise ParameterError("model_params", job.model_params, positive().describe(), flag="--model-params")
    if files.trace and job.strategy.cutoff is None:  # its file would stay empty
        raise InputError(f"method {job.strategy.name!r} does not use --trace: it keeps no ratings to trace (the "
                         "acurank and acurank-auto families do)")
    if job.inputs.shard is not None and job.strategy.lockstep:
        raise InputError(_pooled_shard(job.strategy))
    plan = files.declare(job.inputs.read_by(FilePlan()), bill=job.dry_run is not None)
    (reads, logs), keeps = choice.files, choice.backend.keeps
    for flag, path in reads:
        plan.read(flag, path)
    for flag, path in logs:
        plan.write(flag, path, may_exist=files.resumable(), log=True)  # restarted with --overwrite, once all held
    if job.pivot is not None and job.pivot.texts is not None:
        plan.read("--pivot", job.pivot.source)
    if job.calibrate is not None:
        plan.read("--calibrate", job.calibrate.qrels).write("--calibration", job.calibrate.output)
    elif job.relevance is not None:
        plan.read("--calibration", job.relevance.source)
    if job.cache is not None:  # what the backend will open there checked usable with the rest (nothing made)
        cache = Path(pipeline.cache_path(job.cache))  # "default": the default path, the one owner of it
        opened = {str(path): what for path, what in stores_of(cache, keeps)}
        for flag, path in (("--cache", cache), ("(the embedding store beside --cache)", store_path(cache))):
            plan.write(flag, path, store=True, opened_as=opened.get(str(path)))
    plan.check(files.overwrite, make=False)  # made once every check held (_made); a dry run makes none
    return plan



def _pooled_shard(strategy: Strategy) -> str:
    """Why --shard is refused for a method that pools across the run's queries, and the ways out. Refused, not
    warned: a sharded run must merge into the unsharded run byte for byte (what merge promises), and a warning in
    one of a job array's logs is not read; the refusal comes before any call and costs nothing."""
    what = ("its query-set budget (--budget-total) is spread over the whole run's queries"
            if strategy.set_budget is not None else "it pools its noise model over the run's queries (--beta-pool run)")
    way = ("give a per-query budget instead (acurank-N, --budget)" if strategy.set_budget is not None
           else "pass --beta-pool query (each query alone: shards merge into the unsharded run)")
    return (f"--shard with {strategy.name}: {what}, so each shard would pool only its own queries and the merged run "
            f"would differ from the unsharded one; {way}, or rerank without --shard")


def _checked_relevance(job: Any, spec: Any) -> None:
    """--calibrate against the method and --passages, --absolute against the backend (``spec``), --prior em against
    --shard (before any input is read). A map applied, the cut and the pivot met the rules every entrance's call meets
    where the job was made (:func:`~acurank_cli.run.request.settle`)."""
    if job.calibrate is not None:  # a map fit: the command line's alone
        rel.check_applicable(job.strategy, job.passages, "--calibrate")
    if job.calibrate is not None and job.calibrate.absolute and not spec.pointwise:  # an applied map's: check_origin
        raise InputError(f"--absolute reads the reranker's own score of each document alone, and reranker "
                         f"{job.backend} gives none (a pointwise reranker does: minilm, ce:)")
    if job.calibrate is not None and job.inputs.shard is not None:  # merge fits none: each shard's map its own
        raise InputError("--shard with --calibrate: the map is fit on the run's judged queries when it ends, so each "
                         "shard would fit one on its own queries and write it to the same --calibration file; fit "
                         "the map without --shard")
    if job.relevance is not None and job.relevance.prior is not None and job.inputs.shard is not None:
        raise InputError("--shard with --prior em: EM estimates the share of relevant candidates over the run's "
                         "queries, so each shard would move its map by its own and the merged run would differ from "
                         "the unsharded one; rerank without --shard")


def _judged(job: Any, inputs: Any) -> tuple[dict[str, dict[str, int]] | None, Shift | None]:
    """(the qrels --calibrate fits on, read; the comparison of these queries with --calibration's map's), each None
    where not asked: a map applied has its reranker, method and fitting queries checked, and these queries compared
    with its own by their first-stage signals, before any call. (The map's k was kept where the method was built:
    relevance.keep_maps_settings.)"""
    if job.relevance is not None and job.calibrate is None:
        rel.check_origin(job.relevance.calibration, job.backend, job.strategy.name, list(inputs.expected),
                         job.allow_map_mismatch)
        return None, compared(job.relevance.calibration.fit, inputs.tasks)
    if job.calibrate is None:
        return None, None
    from ..io.collection_files import read_qrels

    qrels = read_qrels(job.calibrate.qrels)
    rel.check_fittable(qrels, inputs.tasks, job.calibrate.grade, job.calibrate.qrels)
    return qrels, None


__all__ = ["Checked", "preflight"]
