"""The JSON lines of a run's stats and trace files, written and read back here (the records themselves, in
:mod:`acurank_cli.records`, are in-memory values): a stats line per finished query (:func:`stats_line`,
:func:`stats_record`) and a trace line per AcuRank step (:func:`trace_line`, :func:`trace_record`). Key order is
fixed and fields added later are left out at their defaults, so a default run's lines stay byte-identical to those
written before the field existed."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..records import (DocRating, IterationRecord, PassageSpan, PassageSummary, Phase, RelevanceSummary, StatsRecord, StopReason,
                       TraceRecord)


def _iteration_line(it: IterationRecord) -> dict[str, Any]:
    out = {"step": it.step, "iteration": it.iteration, "phase": it.phase.value, "uncertain": it.uncertain,
           "groups": it.groups, "window_sizes": list(it.window_sizes)}
    if it.thinking is not None:
        out["thinking"] = it.thinking
    return out


def _iteration(rec: Mapping[str, Any]) -> IterationRecord:
    thinking = rec.get("thinking")
    return IterationRecord(step=int(rec["step"]), iteration=int(rec["iteration"]), phase=Phase(rec["phase"]),
                           uncertain=rec.get("uncertain"), groups=int(rec["groups"]),
                           window_sizes=tuple(int(x) for x in rec["window_sizes"]),
                           thinking=None if thinking is None else int(thinking))


def stats_line(r: StatsRecord) -> dict[str, Any]:
    """A query's stats line (key order fixed; ``endpoints`` only when a backend named one, the run's identity only
    when known, ``flops`` and ``beta`` only when there are)."""
    out: dict[str, Any] = {
        "qid": r.qid, "method": r.method, "calls": r.calls, "docs_sent": r.docs_sent,
        "cached_calls": r.cached_calls, "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
        "rerank_seconds": r.rerank_seconds, "parse_counts": {str(k): v for k, v in r.parse_counts.items()},
        "rounds": r.rounds,
    }
    if r.endpoints:
        out["endpoints"] = dict(r.endpoints)
    out.update({"iterations": [_iteration_line(it) for it in r.iterations],
                "stop": None if r.stop is None else r.stop.value, "seconds": r.seconds})
    if r.fingerprint is not None:
        out.update({"fingerprint": r.fingerprint, "reranker": r.reranker, "params": r.params})
    if r.flops is not None:
        out["flops"] = r.flops
    if r.beta is not None:
        out["beta"] = r.beta
    if r.reasoning_tokens is not None:
        out.update(reasoning_tokens=r.reasoning_tokens, thinking_calls=r.thinking_calls)
    if r.passages is not None:
        out["passages"] = _passages_line(r.passages)
    if r.relevance is not None:
        out["relevance"] = _relevance_line(r.relevance)
    if r.money is not None:
        out["money"] = r.money
    return out


def _relevance_line(r: RelevanceSummary) -> dict[str, Any]:
    """``relevance``: the grade, P(none), the documents kept by the cut (absent: no cut), P(relevant) per document
    in rank order (6 decimals), the run's comparison with the map's fitting queries (absent: none made) and the share
    ``--prior em`` moved the map to (absent: not asked)."""
    out: dict[str, Any] = {"grade": r.grade, "p_none": float(f"{r.p_none:.6g}")}
    if r.kept is not None:
        out["kept"] = r.kept
    out["p"] = {d: round(p, 6) for d, p in r.p.items()}
    if r.shift is not None:
        out["shift"] = dict(r.shift)
    if r.prior is not None:
        out["prior"] = dict(r.prior)
    return out


def _relevance(rec: Mapping[str, Any] | None) -> RelevanceSummary | None:
    if rec is None:
        return None
    kept = rec.get("kept")
    return RelevanceSummary(grade=int(rec["grade"]), p_none=float(rec["p_none"]),
                            p={str(d): float(v) for d, v in (rec.get("p") or {}).items()},
                            kept=None if kept is None else int(kept), shift=rec.get("shift"), prior=rec.get("prior"))


def _passages_line(p: PassageSummary) -> dict[str, Any]:
    """``passages``: counts, and each split document's scoring passage as {passage, words: [start, end], chars:
    [start, end]}."""
    return {"ranked": p.ranked, "split": p.split, "capped": p.capped,
            "best": {d: {"passage": s.index, "words": [s.start, s.end], "chars": [s.char_start, s.char_end]}
                     for d, s in p.best.items()}}


def _passages(rec: Mapping[str, Any] | None) -> PassageSummary | None:
    if rec is None:
        return None
    best = {str(d): PassageSpan(int(s["passage"]), int(s["words"][0]), int(s["words"][1]), int(s["chars"][0]),
                                int(s["chars"][1])) for d, s in (rec.get("best") or {}).items()}
    return PassageSummary(ranked=int(rec["ranked"]), split=int(rec["split"]), capped=int(rec.get("capped", 0)),
                          best=best)


def stats_record(rec: Mapping[str, Any]) -> StatsRecord:
    """A stats line as written (fields added later default; raises KeyError/TypeError/ValueError when the ``qid``
    or ``calls`` is missing or a field has the wrong type)."""

    def num(key: str, kind: type = int, absent: Any = 0) -> Any:
        value = rec.get(key)
        return absent if value is None else kind(value)

    stop = rec.get("stop")
    return StatsRecord(
        qid=str(rec["qid"]), method=str(rec.get("method", "")), calls=int(float(rec["calls"])),
        docs_sent=num("docs_sent"), cached_calls=num("cached_calls"), input_tokens=num("input_tokens", int, None),
        output_tokens=num("output_tokens", int, None), rerank_seconds=num("rerank_seconds", float),
        parse_counts=dict(rec.get("parse_counts") or {}), rounds=num("rounds", int, None),
        endpoints=dict(rec.get("endpoints") or {}),
        iterations=tuple(_iteration(it) for it in rec.get("iterations") or ()),
        stop=None if stop is None else StopReason(stop), seconds=num("seconds", float, None),
        fingerprint=rec.get("fingerprint"), reranker=rec.get("reranker"), params=rec.get("params"),
        flops=num("flops", float, None), beta=num("beta", float, None),
        reasoning_tokens=num("reasoning_tokens", int, None), thinking_calls=num("thinking_calls", int, None),
        passages=_passages(rec.get("passages")), relevance=_relevance(rec.get("relevance")),
        calibration_features=rec.get("calibration_features"), money=num("money", float, None),
    )


def _rating_line(d: DocRating) -> dict[str, Any]:
    """A document's rating in a trace line (``p_topk`` only where it is known: the final ratings)."""
    out = dataclasses.asdict(d)
    if d.p_topk is None:
        del out["p_topk"]
    return out


def trace_line(r: TraceRecord) -> dict[str, Any]:
    """A step's trace line: every document's mu, sigma, s_i and rank, and the threshold t."""
    out = {"qid": r.qid, "method": r.method, "iteration": r.iteration, "phase": r.phase.value,
           "t": r.t, "docs": [_rating_line(d) for d in r.docs]}
    if r.think is not None:
        out["think"] = list(r.think)
    if r.pivot is not None:  # only with --pivot: a trace without one is unchanged
        out["pivot"] = {"mu": r.pivot[0], "sigma": r.pivot[1]}
    if r.windows:  # the windows the step sends (none on the last step)
        out["windows"] = [list(w) for w in r.windows]
    return out


def trace_record(rec: Mapping[str, Any]) -> TraceRecord:
    """A trace line as written (raises KeyError/TypeError/ValueError on a line that is not one)."""
    docs = tuple(DocRating(docid=str(d["docid"]), mu=float(d["mu"]), sigma=float(d["sigma"]),
                           s=None if d.get("s") is None else float(d["s"]), rank=int(d["rank"]),
                           p_topk=None if d.get("p_topk") is None else float(d["p_topk"])) for d in rec["docs"])
    t = rec.get("t")
    think = rec.get("think")
    pivot = rec.get("pivot")
    windows = tuple(tuple(str(d) for d in w) for w in rec.get("windows") or ())
    return TraceRecord(qid=str(rec["qid"]), method=str(rec.get("method", "")), iteration=int(rec["iteration"]),
                       phase=Phase(rec["phase"]), t=None if t is None else float(t), docs=docs,
                       think=None if think is None else tuple(bool(x) for x in think),
                       pivot=None if pivot is None else (float(pivot["mu"]), float(pivot["sigma"])),
                       windows=windows)
