"""What a rerank run does with each query as it finishes (:func:`~.job.run_job`'s loop hands them here): its cost
settled (``--max-cost``'s reservation released), its progress said, and its run block, stats record and trace
written, each query as it ends. Under ``--prior em`` the queries are held instead, and written once every query
has finished: EM reads every query's candidates to estimate the run's share of relevant candidates, and the map is
moved to that share for all of them (docs/relevance.md). A run killed before then has written nothing; a rerun
takes each answered window from the call cache, paying for none twice. A resumed run whose finished queries
recorded their share keeps it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .. import relevance as rel
from ..errors import InputError
from ..io.line_records import stats_line
from ..io.writers import run_lines
from ..records import QueryOutcome, Ranked, RunAbout, StatsRecord
from ..relevance import Relevance


def written(outcome: QueryOutcome, tail: tuple, about: RunAbout, tag: str, relevance: Relevance | None = None, *,
            shift: Any = None, prior: Any = None) -> tuple[str, dict]:
    """A finished query's run block and stats record; the candidates below --depth (``tail``) follow the reranked
    head in first-stage order, with scores below the head's last. With a calibration map the stats hold P(relevant)
    (``shift``: the run's comparison with the map's queries; ``prior``: --prior em's share, both said in every
    record); a cut drops the tail and what it cuts."""
    record = StatsRecord.of(outcome, about)
    head = list(outcome.ranking)
    if relevance is not None:
        head, summary = rel.judged(relevance, head, *outcome.rated(), absolute=outcome.absolute_scores())
        if shift is not None:  # the run's comparison, in every record (a run to stdout has no meta file)
            summary = dataclasses.replace(summary, shift=shift.as_dict())
        if prior is not None:
            summary = dataclasses.replace(summary, prior=prior)
        record = dataclasses.replace(record, relevance=summary)
        if relevance.cut is not None:
            tail = ()
    stats = stats_line(record)
    if tail:
        stats["tail"] = len(tail)
    ranking = head + [Ranked(c.docid, head[-1].score) for c in tail]
    return run_lines(outcome.qid, ranking, tag), stats


def calibration_row(outcome: QueryOutcome, absolute: bool) -> tuple[str, list[str], list[tuple[float, ...]]]:
    """What ``--calibrate`` fits on from a finished query: (qid, its docids in rank order, their features), with the
    backend's absolute scores where the map is fit with them (``absolute``; a query that made no call, one candidate,
    has none to give and is not fit on: no docids, no features)."""
    ratings, pivot = outcome.rated()
    ranked = [ratings[r.docid] for r in outcome.ranking]
    docids = [r.docid for r in ranked]
    values = rel.absolute_of(docids, outcome.absolute_scores()) if absolute else None
    if absolute and values is None and not outcome.tally.calls:
        return outcome.qid, [], []
    if absolute and values is None:
        raise InputError(f"--absolute: query {outcome.qid}'s answers carry no absolute score (answers kept by a call "
                         "cache made before acurank kept them): give another --cache, or --no-cache")
    return outcome.qid, docids, rel.features(ranked, pivot, values)


@dataclass
class Finisher:
    """The run's finished queries, settled, said and written (see the module's doc). ``running`` is the job's
    :class:`~.job._Running`; ``write`` writes one query (its outcome, its money) and ``settle`` settles one (its
    money, None without prices); ``held``: --prior em's queries waiting for the run's end (None: written as they
    finish)."""

    running: Any
    about: RunAbout
    traces: dict
    settle: Any
    relevance: Relevance | None = None
    held: list | None = None
    #: --prior em's share, as each record says it (None: not asked, or not estimated yet)
    prior: dict | None = None
    features: list = field(default_factory=list)

    @classmethod
    def of(cls, running: Any, about: RunAbout, traces: dict, settle: Any) -> "Finisher":
        """The run's finisher: under --prior em, the share its finished queries recorded (a resume keeps it), else
        its queries held until every one has finished."""
        job = running.job
        made = cls(running, about, traces, settle, job.relevance, features=running.features)
        if job.relevance is None or job.relevance.prior != "em":
            return made
        recorded = _recorded_prior(job, running.outputs)
        if recorded is None:
            made.held = []
        else:
            made.fix(recorded)
            running.status.print(f"acurank: --prior em: {made.said()} (as this run's finished queries recorded it)",
                                 markup=False, soft_wrap=True)
        return made

    def fix(self, prior: dict) -> None:
        """Move the map to ``prior``'s share for every query written from now on (a share of None: EM found none in
        (0, 1), and the map is left as fit)."""
        self.prior = prior
        share = prior.get("share")
        self.relevance = dataclasses.replace(self.relevance, prior=None if share is None else float(share))

    def said(self) -> str:
        """What the fixed share is, in words."""
        p = self.prior
        if p.get("share") is None:
            return (f"EM over {p['queries']} queries ran to the edge of (0, 1) ({p['boundary']:.3g}): no share of "
                    "relevant candidates fits the map's probabilities here (a map far from its own collection?), so "
                    "P(relevant) is the map's as fit")
        return (f"{p['share']:.3f} of these queries' candidates are relevant by EM over {p['queries']} queries (the "
                f"map was fit where {p['fit_share']:.3f} were); P(relevant) moved to it")

    def done(self, outcome: QueryOutcome) -> None:
        """A query finished: settled, then written (or held, under --prior em)."""
        money = self.settle(outcome)
        if self.held is not None:
            self.held.append((outcome, money))
        else:
            self.write(outcome, money)

    def write(self, outcome: QueryOutcome, money: float | None) -> None:
        r = self.running
        job = r.job
        block, stats = written(outcome, r.inputs.tail(outcome.qid), self.about, job.outputs.tag, self.relevance,
                               shift=r.shift, prior=self.prior)
        if job.calibrate is not None:  # what the map is fit on, once every query is done (kept in the stats: a
            self.features.append(calibration_row(outcome, job.calibrate.absolute))  # resume reads them back)
            stats["calibration_features"] = {"docids": self.features[-1][1],
                                             "x": [list(x) for x in self.features[-1][2]]}
        if money is not None:
            stats["money"] = money
        r.outputs.write_query(outcome.qid, block, stats, self.traces.pop(outcome.qid, []))

    def flush(self) -> None:
        """The run's end: --prior em's share estimated over the held queries, said, and each of them written."""
        if not self.held:
            return
        calibration = self.relevance.calibration
        p = [v for outcome, _ in self.held for v in _probabilities(calibration, outcome)]
        share, steps = rel.em_share(p, calibration.share)
        edge = not rel.EM_BOUNDARY <= share <= 1 - rel.EM_BOUNDARY
        self.fix({"share": None if edge else round(share, 6), "fit_share": round(calibration.share, 6),
                  "queries": len(self.held), "steps": steps, **({"boundary": share} if edge else {})})
        console = self.running.err if edge else self.running.status  # a warning: said under --quiet too
        console.print(f"acurank: {'warning: ' if edge else ''}--prior em: {self.said()}", markup=False, soft_wrap=True)
        held, self.held = self.held, []
        for outcome, money in held:
            self.write(outcome, money)


def _probabilities(calibration: Any, outcome: QueryOutcome) -> tuple[float, ...]:
    """The map's P(relevant) of a query's ranked candidates, as fit (what EM reads)."""
    ratings, pivot = outcome.rated()
    return rel.judge(calibration, [ratings[r.docid] for r in outcome.ranking], pivot, (), outcome.absolute_scores()).p


def _recorded_prior(job: Any, outputs: Any) -> dict | None:
    """The share --prior em moved the map to, as this output's finished queries recorded it (None: none finished)."""
    stats = job.outputs.stats_path()
    if not outputs.done or not stats:
        return None
    from pathlib import Path

    from ..io.run_files import read_stats

    if not Path(stats).is_file():
        return None
    for qid, record in read_stats(stats).items():
        if qid in outputs.done and record.relevance is not None and record.relevance.prior is not None:
            return dict(record.relevance.prior)
    return None


__all__ = ["Finisher", "calibration_row", "written"]
