"""``rerank --dry-run`` (and ``baseline``): every check the run makes, no model call, and the bill
(:mod:`.estimate`) as a table on stdout and, with ``--stats FILE``, as JSON lines (one a query, then the total)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from ..errors import InputError
from ..io.plan import replacing
from .estimate import (PERSISTENT, REHEARSALS, UNBOUNDED, Bill, QueryBill, Spread, estimate, rehearsal,
                       thought_of, unbounded)
from .preflight import preflight


@dataclass(frozen=True)
class DryRun:
    """``--dry-run`` and its settings: rehearsals and the rehearsal's noise (the prices are the job's)."""

    rehearsals: int = REHEARSALS
    noise: float | None = None

    @classmethod
    def of(cls, wanted: bool, rehearsals: int = REHEARSALS, noise: float | None = None) -> "DryRun | None":
        """The record of the flags, or None without ``--dry-run`` (a rehearsal flag without it: refused)."""
        from .money import check_money

        check_money("rehearsal_noise", noise, "--rehearsal-noise")
        given = (["--rehearsal-noise"] if noise is not None else []) + (
            ["--rehearsals"] if rehearsals != REHEARSALS else [])
        if not wanted:
            if given:
                raise InputError(f"{given[0]} rehearses the bill of --dry-run; add --dry-run")
            return None
        return cls(int(rehearsals), noise)


def run_dry(job: Any, err: Console) -> Bill:
    """``job``'s bill (a :class:`~.job.RerankJob` with --dry-run: its method, --dry-run settings, prices and files;
    the job imports this module, not the reverse), after every check the run makes before its backend is built
    (:func:`~.preflight.preflight`; a run at ``-o`` that a rerun would resume, made with other settings; a backend
    that counts no tokens under --max-cost): the first window's fit (given the backend's prompt-only form), the
    rehearsals and the bill, of the queries a rerun would rerank; nothing is written but ``--stats``."""
    checked = preflight(job, err)
    session, inputs = checked.session, checked.inputs
    files = job.outputs
    if job.passages is not None:
        raise InputError("--dry-run bills documents ranked whole; rehearse without --passages")
    tasks, done = _left(job, session, inputs, checked.status)
    prompter = unlogged(session.choice).counter()  # a listwise LLM's prompts, or minilm's tokenizer: no model
    try:
        if prompter is not None:
            for note in prompter.notes():  # as the run says its backend's (a tokenizer's fallback, the prompt's form)
                checked.status.print(f"acurank: {note}", markup=False, soft_wrap=True)
            why = prompter.unbounded()
            if job.max_cost is None and why is not None:  # under --max-cost: refused (call_bound)
                err.print(f"acurank: warning: {why}{UNBOUNDED}", markup=False, soft_wrap=True)
        per_call = None
        if job.max_cost is not None:  # the run's bound on a call (refused where the backend counts no tokens)
            from .money import call_bound

            per_call = call_bound(prompter or _Unbuilt(job.backend), job.strategy, job.backend)
        if prompter is not None:  # the run's own check, in the run's order, on the prompt-only form
            from ..rerankers.listwise.reranker import first_window_fit
            from .driver import task_scores

            said = first_window_fit(prompter, job.strategy, inputs.tasks, inputs.docs, scores=task_scores)
            if said is not None:
                err.print(f"acurank: warning: {said.cli()}", markup=False, soft_wrap=True)
        bill = _rehearsed(job, session, inputs, tasks, prompter)
    finally:
        if prompter is not None:
            prompter.close()
    _print(bill, checked.status)
    capped = None if per_call is None else _capped(job, bill, tasks, per_call, done)
    if capped is not None:
        left = (f"about {capped['start']} of the {len(tasks)} queries would start, {capped['left']} left unstarted "
                f"(each query's bound, {capped['per_call']:.4g} a call, beside the bill's median money of the ones "
                "before it)" if capped["left"] else "every query would start within it (at the bill's median money)")
        before = f" ({capped['spent']:.4f} spent already by the {len(done)} finished)" if capped["spent"] else ""
        checked.status.print(f"acurank: --max-cost {job.max_cost:g}{before}: {left}", markup=False, soft_wrap=True)
    if files.stats:
        Path(files.stats).parent.mkdir(parents=True, exist_ok=True)  # checked it could be, in preflight
        with replacing(files.stats) as fh:
            for line in _json_lines(bill, capped):
                fh.write(line + "\n")
    return bill


def _left(job: Any, session: Any, inputs: Any, err: Console) -> tuple[list, set[str]]:
    """(the tasks a rerun of the command would rerank, the queries it would keep): those not finished in ``-o``'s run
    where a rerun resumes it (refused, as the run refuses it, where it was made with other settings)."""
    files, tasks = job.outputs, list(inputs.tasks)
    if files.resumable():  # as the run refuses a resume made with other settings (it checks the reranker's too)
        from ..io.run_files import check_settings
        from .fingerprint import fingerprint_of

        check_settings(files.output, fingerprint_of(job, _Unbuilt(job.backend), inputs, session.needs_texts))
    done = set() if job.strategy.lockstep else files.finished(inputs.expected)  # lockstep: a rerun replays them all
    if done:
        tasks = [t for t in tasks if t.qid not in done]
        err.print(f"acurank: {files.output} holds {len(done)} of the {len(inputs.expected)} queries finished (a rerun "
                  f"resumes it, if its settings are this command's): the bill is of the {len(tasks)} left",
                  markup=False, soft_wrap=True)
    return tasks, done


def _rehearsed(job: Any, session: Any, inputs: Any, tasks: list, prompter: Any) -> Bill:
    """The rehearsals of the run's method over ``tasks`` and the bill they make (:func:`~.estimate.estimate`)."""
    options, simulated = session.choice.options, session.choice.backend.oracle
    models, noise, seeds, source = rehearsal(options, simulated, tasks, inputs.qrels, job.dry_run.noise,
                                             job.dry_run.rehearsals)
    persistent = session.choice.backend.pointwise
    what = (f"{job.dry_run.rehearsals} rehearsals of {job.strategy.name} against the simulated reranker "
            f"(noise {noise:g}{PERSISTENT if persistent else ''}, seeds {seeds.start}-{seeds.stop - 1}; grades: "
            f"{source})")
    thought = thought_of(options, session.gate, simulated, prompter)
    if thought is not None:
        held = ("the simulated reranker's cost" if simulated else "the most it may take: a bound"
                if unbounded(prompter) is None else "a local model's default budget, which a served model does not "
                "keep: an estimate, no bound")
        what += f"; thinking {thought.settings.thinking.value}, each thought billed at {thought.tokens} output tokens ({held})"
    return estimate(job.strategy, tasks, inputs.docs, prompter, models=models, noise=noise, seeds=seeds,
                    prices=None if job.prices is None else (job.prices.per_million_in, job.prices.per_million_out),
                    what=what, persistent=persistent, thought=thought)


def _capped(job: Any, bill: Bill, tasks: list, per_call: tuple[int, int], done: set[str]) -> dict[str, Any]:
    """What --max-cost would leave, one query at a time: the next starts while what is spent (a resumed run's
    finished queries, from the stats beside it, as the run counts them: :func:`~.money.spent_before`), what the ones
    before it cost (the bill's medians) and its bound stay within the cap."""
    from ..io.run_files import stats_path_for
    from .money import spent_before

    money = {q.qid: bill.money(q) for q in bill.queries}
    before = spent_before(job.prices, str(stats_path_for(job.outputs.output)), done) if done else 0.0
    spent, call = before, job.prices.cost(*per_call)
    started = 0
    for task in tasks:
        if spent + (job.strategy.most_calls(task) or 0) * call > job.max_cost + 1e-12:
            break
        spent += money[task.qid].median if money.get(task.qid) is not None else 0.0
        started += 1
    return {"limit": job.max_cost, "per_call": call, "spent": round(before, 6), "start": started,
            "left": len(tasks) - started}


def unlogged(choice: Any) -> Any:
    """The backend's choice without its prompt log (--log-prompts): a dry run sends no prompt, and its prompts
    opened the log (a file made, a folder refused)."""
    import dataclasses

    if getattr(choice.options, "log_prompts", None) is None:
        return choice
    return dataclasses.replace(choice, options=dataclasses.replace(choice.options, log_prompts=None))


class _Unbuilt:
    """The backend a dry run does not build: in a fingerprint (its settings are compared by the run) and where a
    backend that counts no tokens is refused (--max-cost)."""

    def __init__(self, name: str):
        self.name = name

    def fingerprint(self) -> dict:
        return {}


def _fmt(s: Spread, exact: bool, money: bool = False) -> str:
    f = (lambda v: f"{v:,.4f}") if money else (lambda v: f"{v:,.0f}")
    return f(s.median) if exact else f"{f(s.median)} [{f(s.low)}-{f(s.high)}]"


def _row(bill: Bill, q: QueryBill, priced: bool) -> list[str]:
    row = [q.qid, _fmt(q.calls, bill.exact)]
    if q.input_tokens is None:
        return row + ["-", "-"]
    row += [_fmt(q.input_tokens, bill.exact and q.input_tokens.low == q.input_tokens.high),
            _fmt(q.output_tokens, bill.exact and q.output_tokens.low == q.output_tokens.high)]
    if priced:
        money = bill.money(q)
        row.append(_fmt(money, money.low == money.high, money=True))
    return row


def _print(bill: Bill, err: Console) -> None:
    import typer

    tokens = bill.total.input_tokens is not None
    priced = bill.prices is not None and tokens
    head = ["query", "calls", "input tokens", "output tokens"] + (["money"] if priced else [])
    rows = [head, *(_row(bill, q, priced) for q in bill.queries), _row(bill, bill.total, priced)]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    for r in rows:
        typer.echo("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    how = ("exact calls: the same in every rehearsal (for a method whose calls depend on the answers, such as "
           "acurank-N below its cap, a sign only)" if bill.exact
           else "median [90% interval] of each query's calls")
    err.print(f"acurank: dry run, no model called: {bill.rehearsal}; {how}"
              + ("; tokens counted as the backend counts them (a listwise LLM's prompts, minilm's tokenizer) at each "
                 "rehearsal's calls and documents" if tokens else "; the backend counts no tokens, so none are billed")
              + ("" if bill.prices is None or tokens else ": no money either"), markup=False, soft_wrap=True)


def _record(bill: Bill, q: QueryBill) -> dict[str, Any]:
    rec: dict[str, Any] = {"calls": q.calls.as_dict()}
    if q.input_tokens is not None:
        rec.update(input_tokens=q.input_tokens.as_dict(0), output_tokens=q.output_tokens.as_dict(0))
    money = bill.money(q)
    if money is not None:
        rec["money"] = money.as_dict(6)
    return rec


def _json_lines(bill: Bill, capped: dict | None = None) -> list[str]:
    out = [json.dumps({"qid": q.qid, **_record(bill, q)}) for q in bill.queries]
    total = {"queries": len(bill.queries), **_record(bill, bill.total), "exact": bill.exact, "rehearsal": bill.rehearsal,
             **({} if capped is None else {"max_cost": {k: capped[k] for k in ("limit", "spent", "start", "left")}})}
    out.append(json.dumps({"total": total}))
    return out


__all__ = ["DryRun", "run_dry"]
