"""What determines a run's result, recorded beside it so a resume never mixes settings.

A :class:`RunFingerprint` holds the method and every parameter, the reranker's identity
(backend, model, prompt format, context size, temperature, ...), and a digest of the inputs
(queries, candidates and scores at the chosen depth, and the texts when the reranker reads them).
Left out on purpose: what cannot change the result (``--batch-queries``, ``--updater``, which is
bit-identical either way, the cache, progress).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

from ..io.run_files import command_part
from ..method.strategy import Strategy
from ..records import Doc, RankingTask

#: Parameters that cannot change a run's result.
NOT_RESULT = ("updater", "name")

#: Parameters added after runs were first recorded, with the value a fingerprint without them had.
ADDED_SINCE = {"params.uncertainty": "threshold", "params.sigma": "mu/3", "params.budget_total": None,
               "params.budget_wave": 8, "params.outcome": "order"}

#: Parameters left out of the fingerprint at their default (added later: a default run's fingerprint and
#: stats stay byte-identical to those recorded before the parameter existed).
OMITTED_AT_DEFAULT = {"sigma": "mu/3", "budget_total": None, "budget_wave": 8, "outcome": "order"}


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def strategy_params(strategy: Strategy) -> dict[str, Any]:
    """A strategy's parameters as plain JSON values (its params record, or its own fields)."""
    record = strategy.parameters()
    fields = dataclasses.asdict(record) if dataclasses.is_dataclass(record) else {}
    return _plain({k: v for k, v in fields.items()
                   if k not in NOT_RESULT and not (k in OMITTED_AT_DEFAULT and v == OMITTED_AT_DEFAULT[k])})


def input_digest(tasks: Iterable[RankingTask], docs: dict[str, Doc], with_texts: bool) -> str:
    """sha256 over queries, candidates with their scores, and (if read) the texts."""
    h = hashlib.sha256()
    for task in tasks:
        h.update(json.dumps([task.qid, task.query], ensure_ascii=False).encode("utf-8"))
        for c in task.candidates:
            h.update(json.dumps([c.docid, repr(c.score)]).encode("utf-8"))
            if with_texts:
                d = docs[c.docid]
                h.update(json.dumps([d.title, d.text], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


def _digest(value: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class RunFingerprint:
    """Method, parameters, reranker identity and input digest of one run."""

    method: str
    params: dict
    reranker: dict
    inputs: dict

    def as_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))

    @property
    def digest(self) -> str:
        """A short hex digest of the whole fingerprint (the meta file beside the run records it)."""
        return _digest(self.as_dict())

    @property
    def command_digest(self) -> str:
        """A short hex digest of the command: the fingerprint without what depends on which queries it ran
        (:func:`command_part`). Stats records carry it, so the parts of a sharded run write the stats lines
        the unsharded run writes."""
        return _digest(command_part(self.as_dict()))

    def differences(self, recorded: dict[str, Any]) -> list[str]:
        """``key: recorded -> now`` for every leaf that differs from a recorded fingerprint."""
        out: list[str] = []

        def walk(prefix: str, old: Any, new: Any) -> None:
            if isinstance(old, dict) and isinstance(new, dict):
                for key in sorted(set(old) | set(new)):
                    walk(f"{prefix}.{key}" if prefix else key, old.get(key), new.get(key))
            elif old != new and not (old is None and ADDED_SINCE.get(prefix, old) == new):
                show = lambda v: (v[:12] + "...") if isinstance(v, str) and len(v) > 24 else v  # noqa: E731
                out.append(f"{prefix}: {show(old)!r} -> {show(new)!r}")

        walk("", recorded, self.as_dict())
        return out


def fingerprint_of(job: Any, backend: Any, inputs: Any, needs_texts: bool) -> RunFingerprint:
    """What made a job's run (a :class:`~.job.RerankJob`): method and parameters, the reranker's identity (``backend``:
    built, or a dry run's stand-in), the inputs (and shard, kept tail, passages, the map, the pivot)."""
    shard = {"shard": str(job.inputs.shard)} if job.inputs.shard else {}
    tail = {"tail": "kept"} if inputs.any_tail else {}
    split = {"passages": job.passages.described()} if job.passages is not None else {}
    if job.relevance is not None:  # P(relevant), the cut and the score column change what is written
        split["relevance"] = job.relevance.described()
    if job.pivot is not None:  # a player in every window: other ratings, another run
        split["pivot"] = job.pivot.described()
    if job.calibrate is not None and job.calibrate.absolute:  # features kept in the stats of another width
        split["calibrate"] = {"absolute": True}
    return RunFingerprint(
        job.strategy.name, strategy_params(job.strategy), backend.fingerprint(),
        {"digest": input_digest(inputs.tasks, inputs.docs, needs_texts), "queries": len(inputs.tasks),
         "depth": job.inputs.depth, "tag": job.outputs.tag, **shard, **tail, **split},
    )
