"""What a run does with relevance, and the map's rules at every entrance: the flags read (``--calibration``,
``--calibrate``, ``--cut``, ``--score``, ``--cut-target``), the map's k, where it was fit, whether it applies,
and a query's ranking with its P(relevant) (:func:`judged`)."""

from __future__ import annotations

from pathlib import Path
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import InputError
from .cuts import Cut, CutTarget, p_none
from .maps import CalibrationMap, absolute_of, adjusted


@dataclass(frozen=True)
class Relevance:
    """What a run does with relevance (``--calibration``, ``--cut``, ``--score p_relevant``): the map, the cut
    (None: every document kept) and whether the run's score column is P(relevant)."""

    calibration: CalibrationMap
    cut: Cut | None = None
    score: bool = False
    #: the map's file (None: given as a map)
    source: str | None = None
    #: with a cut: aim AcuRank's uncertain set at the cut's boundary (``--cut-target cut``, the default with a map fit
    #: with a pivot) or at the top k (``topk``, the default without: the cut's target then cost more calls for a lower
    #: F1, BENCHMARKS.md section 25)
    target: bool = False
    #: ``--prior em``: the map moved to the run's own share of relevant candidates, which EM estimates on every query's
    #: candidates before any is written ("em"), then that share (a float, fixed for the run); None: the map as fit
    prior: str | float | None = None

    def described(self) -> dict[str, Any]:
        """What the run's fingerprint records."""
        out: dict[str, Any] = {"calibration": self.calibration.digest, "grade": self.calibration.grade}
        if self.prior is not None:
            out["prior"] = "em"
        if self.cut is not None:
            out["cut"] = str(self.cut)
        if self.score:
            out["score"] = "p_relevant"
        if self.cut is not None:
            out["target"] = "cut" if self.target else "topk"
        return out

    def aimed(self, strategy):
        """``strategy`` with its uncertain set at the cut's boundary where a cut is asked and targeted and the method
        can aim (AcuRank's family); otherwise the strategy itself."""
        if self.cut is None or not self.target or not hasattr(strategy, "aimed_at"):
            return strategy
        return strategy.aimed_at(CutTarget(self.calibration, self.cut))


@dataclass(frozen=True)
class Calibrate:
    """Fit a map on a run's judged queries (``--calibrate QRELS``): the qrels, the grade and the map file to write."""

    qrels: str
    grade: int
    output: str
    #: ``--absolute``: the map also reads the backend's own score of each document (:data:`~.maps.ABSOLUTE`)
    absolute: bool = False


SCORES = ("mu", "p_relevant")
TARGETS = ("cut", "topk")


def options(calibration: str | None, calibrate: str | None = None, grade: int | None = None, cut: str | None = None,
            score: str | None = None, *, allow: bool = False, absolute: bool = False,
            prior: str | None = None) -> tuple[Relevance | None, Calibrate | None]:
    """The command line's own relevance flags checked (each fault one line naming the flag) and the map read: what the
    run applies and what it fits (at most one of them); ``cut``: --cut given (its rules and its target's, the rules
    every entrance's call meets: :func:`~acurank_cli.run.request.settle`, which gives the Relevance its cut);
    ``allow``: --allow-map-mismatch; ``absolute``: --absolute (fit with the backend's own scores); ``prior``: --prior."""
    from .pivot import SAID

    for flag, path, what in (("--calibration", calibration, "the map's file"), ("--calibrate", calibrate, "the qrels")):
        if path is not None and not str(path).strip():  # a blank name reads as the working folder
            raise InputError(f"{flag} {path!r}: give {what}")
    if calibrate is not None and Path(calibrate).is_dir():
        raise InputError(f"--calibrate {calibrate}: is a directory, expected the qrels file the map is fit on")
    check_allowed(allow, calibration is not None and calibrate is None, SAID["cli"])
    if score is not None and score not in SCORES:
        raise InputError(f"--score {score!r}: must be one of {', '.join(SCORES)}")
    if grade is not None and calibrate is None:
        raise InputError("--relevant-grade is the grade --calibrate fits for; a map applied has its own")
    if absolute and calibrate is None:
        raise InputError("--absolute is a feature --calibrate fits the map with; a map applied reads what it was fit on")
    if prior is not None and prior != "em":
        raise InputError(f"--prior {prior!r}: must be em (the share EM estimates on the run's own candidates)")
    if prior is not None and (calibration is None or calibrate is not None):
        raise InputError("--prior em needs --calibration MAP.json (a map fit with --absolute) to move" if calibration is
                         None else "--prior em moves a map applied to these queries; --calibrate fits one on them")
    if calibration is None:
        for flag, value in (("--calibrate", calibrate), ("--score p_relevant", score == "p_relevant" or None)):
            if value is not None:
                raise InputError(f"{flag} needs --calibration MAP.json (the map {'to write' if flag == '--calibrate' else 'that gives P(relevant)'})")
        return None, None
    if calibrate is not None:
        if cut is not None or score == "p_relevant":
            raise InputError("--calibrate fits --calibration on this run's queries, so it cannot also cut or score them "
                             "(apply the map to other queries: a second run without --calibrate)")
        return None, Calibrate(calibrate, 1 if grade is None else grade, calibration, absolute)
    fitted = CalibrationMap.load(calibration)
    if prior is not None:
        check_prior(fitted)
    return Relevance(fitted, None, score == "p_relevant", calibration, prior=prior), None


def check_prior(calibration: CalibrationMap) -> None:
    """``--prior em`` needs a map fit with ``--absolute`` (on its relative features alone EM's share stays at the
    fit's or moves away from the truth, BENCHMARKS.md 38) that records its fitting share of relevant candidates."""
    if not calibration.absolute:
        raise InputError("--prior em moves a map fit with --absolute (the reranker's own score of each document); on "
                         "a map's relative features alone EM cannot see how many candidates are relevant "
                         "(BENCHMARKS.md 38): fit the map with --calibrate QRELS --absolute")
    if calibration.share is None:
        raise InputError("--prior em: the map records no share of relevant candidates (its fit's documents and "
                         "relevant); fit it again with --calibrate")


def check_target(target: str | None, cut: bool, said: Any) -> str | None:
    """Where a cut's calls go (``--cut-target``, the API's and a request's ``cut_target``): ``cut`` or ``topk`` in any
    case, as a cut's ``f1`` and a method's name are read, and only with a cut (``said``: the entrance's
    :class:`~acurank_cli.relevance.Spelling`). Returns it as it is spelt in :data:`TARGETS` (None: not given)."""
    spelt = None if target is None else target.strip().lower()
    if spelt is not None and spelt not in TARGETS:
        raise InputError(f"{said.target} {target!r}: must be one of {', '.join(TARGETS)}", field=said.target)
    if spelt is not None and not cut:
        raise InputError(f"{said.target} says where a cut's calls go; give {said.cut}", field=said.target)
    return spelt


def cut_asked(calibration: CalibrationMap | None, cut: str | None, target: str | None, said: Any,
              also: str | None = None) -> tuple[Cut | None, str | None]:
    """A call's cut (the API's and a request's ``cut``; ``also``: another setting that cuts, the API's
    ``min_p_relevant``), checked in one order: where its calls go (:func:`check_target`), that a map gives P(relevant),
    the cut's spelling (:meth:`Cut.parse`). Returns (the cut, None: no ``cut``; its target as spelt in
    :data:`TARGETS`)."""
    target = check_target(target, cut is not None or also is not None, said)
    for name in (said.cut if cut is not None else None, also):
        if name is not None and calibration is None:
            raise InputError(f"{name} needs {said.no_map}", field=name)
    return (None if cut is None else Cut.parse(cut, said.cut)), target


def aims(calibration: CalibrationMap, target: str | None) -> bool:
    """Whether a cut aims AcuRank's uncertain set at its boundary: as ``target`` says, else by the map (a map fit with
    a pivot: at the cut; without one: at the top k, where the cut's target measured more calls for a lower F1,
    BENCHMARKS.md section 25; a map fit with --absolute: at the top k, as the cut's target reads the map on ratings
    under way, before every document's absolute score is known). The one rule at every entrance that cuts."""
    if calibration.absolute:
        if target == "cut":
            raise InputError("a cut's target at its boundary reads the map while the ratings move, and a map fit with "
                             "--absolute needs each document's absolute score, known only once its window is answered: "
                             "aim at the top k (cut_target topk)", field="cut_target")
        return False
    return target == "cut" if target is not None else calibration.pivoted


def loaded(value: Any, flag: str = "calibration") -> CalibrationMap | None:
    """A map given as a file's path or as a CalibrationMap (None: none)."""
    if value is None or isinstance(value, CalibrationMap):
        return value
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        return CalibrationMap.load(value, flag)
    raise TypeError("calibration must be a map file's path or an acurank_cli.relevance.CalibrationMap")


def keep_maps_settings(calibration: CalibrationMap | None, method: str, options: dict, flag: str = "calibration"
                       ) -> None:
    """A map is fit at one k (p_topk's) on ratings started one way (the method's ``init``: a run file's scores as
    they are, or their z-scores): a method that takes them and was given none keeps the map's for every call (a
    call's ``top_k`` or ``top_n`` then cuts the list but does not change k; documents, which start from z-scores
    where no init is given, start as the map's did); another given is refused. The one owner of the rule, asked by
    :class:`~acurank_cli.run.pipeline.Methods` at every entrance: ``rerank``/``baseline`` (``--calibration``), the
    API, serve and MCP. A map written before it recorded its init keeps only its k."""
    from ..method.registry import method_options

    if calibration is None:
        return
    taken = method_options(method)
    for key, kept in (("k", calibration.fit.get("k")), ("init", calibration.fit.get("init"))):
        if kept is None or key not in taken:
            continue
        kept = int(kept) if key == "k" else str(kept)
        given = options.get(key)
        given = None if given is None else int(given) if key == "k" else str(getattr(given, "value", given))
        if given is not None and given != kept:
            give = f"--{key} {kept}" if flag.startswith("-") else f"{key} = {kept!r}"  # as the entrance takes it
            what, other = ((f"on p_topk at k = {kept}", f"at k = {given}") if key == "k" else
                           (f"on ratings started with init {kept}", f"with init {given}"))
            raise InputError(f"{flag}: the map was fit {what} and this {key} is {given}: give {give}, or fit a map "
                             f"{other}")
        options[key] = kept


def check_origin(calibration: CalibrationMap | None, backend: str | None, method: str, qids: Sequence[str] = (),
                 allowed: bool = False, said: Any = None) -> None:
    """A map applies to runs of the reranker and method it was fit with, on queries it was not fit on: its
    P(relevant) reads ratings that one reranker's answers under one method made, and measured on its own fitting
    queries it flatters itself (their ECE is a fraction of held-out queries'). Refused in one line, before any call,
    unless ``allowed``. A map written before it recorded these (no ``backend``, no ``qids``) is not checked for them,
    nor is the reranker of a backend given built (the API's instance: None). ``said``: the entrance's words
    (:class:`~acurank_cli.relevance.Spelling`; None: the command line's)."""
    from .pivot import SAID

    said = said or SAID["cli"]
    check_allowed(allowed, calibration is not None, said)
    check_absolute(calibration, backend, said.calibration)
    if calibration is None or allowed:
        return
    flag, allow, this = said.calibration, said.allow, said.applied_to
    fit = calibration.fit
    for what, was, now in (("reranker", fit.get("backend"), backend), ("method", fit.get("method"), method)):
        if was is not None and now is not None and str(was) != str(now):
            raise InputError(f"{flag}: the map was fit with {what} {was} and {this}'s {what} is {now}: its "
                             f"P(relevant) reads the ratings one {what} makes; fit a map with {now}, or {allow}")
    seen = sorted(set(fit.get("qids") or ()) & set(qids))
    if seen:
        raise InputError(f"{flag}: the map was fit on {len(seen)} of these queries (e.g. {seen[0]}), and on its own "
                         f"fitting queries it looks better calibrated than it is; apply it to other queries, or "
                         f"{allow}")



def check_absolute(calibration: CalibrationMap | None, backend: str | None, flag: str) -> None:
    """A map fit with ``--absolute`` reads each document's own score, which only a pointwise reranker gives
    (:attr:`~acurank_cli.rerankers.backend.BackendSpec.pointwise`): refused with another before any call, at every
    entrance that names its reranker (``--allow-map-mismatch`` does not lift it: the feature would be missing)."""
    if calibration is None or not calibration.absolute or backend is None:
        return
    from ..rerankers.backend import BACKENDS

    spec = BACKENDS.entries.get(str(backend).split(":", 1)[0])
    if spec is not None and not spec.pointwise:
        raise InputError(f"{flag}: the map reads each document's own score from its reranker (fit with --absolute), "
                         f"and reranker {backend} gives none (a pointwise reranker does: minilm, ce:)")


def check_allowed(allowed: Any, applied: Any, said: Any) -> None:
    """--allow-map-mismatch (the API's ``allow_map_mismatch``) is True or False, and only with a map to apply
    (``applied``: a map, or whether one is applied), in every entrance's words (``said``)."""
    if not isinstance(allowed, bool):
        raise InputError(f"allow_map_mismatch={allowed!r}: must be True or False", field="allow_map_mismatch")
    if allowed and not applied:
        raise InputError(f"{said.allow.removeprefix('say ')} without a map to apply: it lets a map apply with another "
                         f"reranker or method, or to its own fitting queries; give {said.give_map}, or drop it")


def check_applicable(strategy: Any, passages: Any, flag: str = "--calibration", split_by: str | None = None) -> None:
    """A map applies to a method with ratings (a cutoff k) over documents ranked whole: anything else is refused in
    one line, before any call (``split_by``: what asked for the passages, where not ``--passages``/``passages``)."""
    if strategy.cutoff is None:
        raise InputError(f"{flag}: method {strategy.name!r} keeps no ratings to calibrate (the acurank and "
                         "acurank-auto families do)")
    if passages is not None:
        split_by = split_by or ("--passages" if flag.startswith("--") else "passages")
        raise InputError(f"{flag} with {split_by}: P(relevant) is calibrated on documents ranked whole; rank them "
                         "whole, or without a map", field=split_by)


@dataclass(frozen=True)
class Judgement:
    """A query's ranking judged by a map: P(relevant) of each document in the ranking's order, P(none), and the
    positions (in that order) that every cut asked keeps."""

    p: tuple[float, ...]
    p_none: float
    kept: tuple[int, ...]


def judge(calibration: CalibrationMap, rated: Sequence[Any], pivot: tuple[float, float] | None = None,
          cuts: Sequence[Cut] = (), absolute: Mapping[str, float] | None = None, share: float | None = None
          ) -> Judgement:
    """P(relevant), P(none) and what ``cuts`` keep, of a ranking whose final ratings are ``rated`` (in its order; the
    pivot's rating where one was rated; ``absolute``: the outcome's absolute scores by docid, for a map fit with
    them; ``share``: the share of relevant candidates the map is moved to, ``--prior em``'s): the one place a map's
    answer is composed, for the command line's run (:func:`judged`) and a request's answer
    (:func:`~acurank_cli.run.documents.output_of`). Each cut is applied to what the cuts before it kept (the API's
    ``cut`` then its ``min_p_relevant``)."""
    values = absolute_of([r.docid for r in rated], absolute, calibration.center[-1]) if calibration.absolute else None
    probs = tuple(calibration.probabilities(list(rated), pivot, values))
    if share is not None:
        probs = tuple(map(float, adjusted(probs, calibration.share, share)))
    kept = list(range(len(probs)))
    for cut in cuts:
        keep = cut.positions([probs[i] for i in kept])
        kept = [i for n, i in enumerate(kept) if n in keep]
    return Judgement(p=probs, p_none=p_none(probs), kept=tuple(kept))


def judged(relevance: Relevance, ranking: Sequence[Any], ratings: Mapping[str, Any],
           pivot: tuple[float, float] | None = None, absolute: Mapping[str, float] | None = None
           ) -> tuple[list[Any], Any]:
    """A query's ranking (Ranked, by mu) with its final ratings (and the pivot's, where one was rated): the ranking as
    written (ordered by P(relevant) when that is the score column, cut when asked) and its
    :class:`~acurank_cli.records.RelevanceSummary`."""
    from ..records import Ranked, RelevanceSummary

    cuts = () if relevance.cut is None else (relevance.cut,)
    if relevance.prior == "em":
        raise ValueError("--prior em: the run's share is estimated before any query is judged (run.job)")
    judgement = judge(relevance.calibration, [ratings[r.docid] for r in ranking], pivot, cuts, absolute,
                      relevance.prior)
    probs, kept = judgement.p, set(judgement.kept)
    order = [i for i in range(len(ranking)) if i in kept]
    if relevance.score:
        order.sort(key=lambda i: -probs[i])
    out = [Ranked(ranking[i].docid, probs[i] if relevance.score else ranking[i].score) for i in order]
    summary = RelevanceSummary(grade=relevance.calibration.grade, p_none=judgement.p_none,
                               p={ranking[i].docid: probs[i] for i in range(len(ranking))},
                               kept=None if relevance.cut is None else len(order))
    return out, summary
