"""The pivot: a reference player in every window (``--pivot``, the API's ``pivot=``, a request's ``pivot``), and
its rules, said once in each entrance's words (:class:`Spelling`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import InputError
from .maps import CalibrationMap


@dataclass(frozen=True)
class Spelling:
    """How an entrance names what a pivot's rules speak of, so that each rule is said once (:func:`pivoted`,
    :func:`check_pivot`, :meth:`Pivot.add_texts`) and every entrance says it in its own words: the command line's
    flags (``rerank``; ``serve`` and ``mcp`` at start), the API's keywords, a server request's fields."""

    pivot: str
    calibration: str
    passages: str
    #: what the rules call the unit that has a pivot or none ("this run", "this call", "this request")
    this: str
    #: how the simulated reranker's pivot is asked for, and the setting of its grade
    simulated: str
    grade: str
    #: how pivot passages are given, for a reranker that reads texts
    texts: str
    #: the cut (``p:X`` or ``f1``) and where its calls go (``cut`` or ``topk``)
    cut: str = "--cut"
    target: str = "--cut-target"
    #: what a cut needs where no map is given (after "CUT needs ")
    no_map: str = "--calibration MAP.json (the map that gives P(relevant))"
    #: how many documents a call keeps (the API's ``top_k``, a request's ``top_n``: they cut the list, never k)
    top_k: str = "top_k"
    #: the documents as a whole (a refusal about them, or about the set of tasks they make)
    documents: str = "documents"
    #: the passages the entrance itself was started or built with (``passages`` names what a call asks for)
    own_passages: str = "--passages"
    #: how a refusal says to apply a map anyway (another reranker or method, its own fitting queries), and what it is
    #: applied to
    allow: str = "say --allow-map-mismatch"
    applied_to: str = "this run"
    #: the way out for first-stage scores ``--init score`` cannot start a rating from (negative ones, a cosine's)
    zscore: str = "use --init zscore"
    #: whether the entrance's settings are flags (the command line's, a server's): an OptionError said as ``.cli()``
    flags: bool = True
    #: how a map to apply is given
    give_map: str = "--calibration MAP.json (without --calibrate)"
    #: the way out for such scores where a map fit with init score keeps it (init zscore would be refused)
    map_zscore: str = "the map (--calibration) was fit with init score: give positive scores, or fit a map with --init zscore"


SAID = {
    "cli": Spelling(pivot="--pivot", calibration="--calibration", passages="--passages", this="this run",
                    simulated="--pivot simulated", grade="--sim-pivot-grade", texts="a file of 'qid<TAB>pivot passage'"),
    "api": Spelling(pivot="pivot", calibration="calibration", passages="passages", this="this call",
                    simulated="pivot='simulated'", grade="sim_pivot_grade", texts="each query's pivot passage",
                    cut="cut", target="cut_target",
                    no_map="P(relevant): build the Reranker with calibration=MAP.json (docs/relevance.md)",
                    own_passages="passages", allow="say allow_map_mismatch=True", zscore="give init='zscore'",
                    give_map="calibration=MAP.json", flags=False,
                    map_zscore="the map (calibration) was fit with init score: give positive scores, or none (the "
                               "documents' order then stands in), or a map fit with --init zscore"),
    "request": Spelling(pivot="pivot", calibration="this server's --calibration map", passages="max_chunks_per_doc",
                        this="this request", simulated="pivot \"simulated\"", grade="the server's --sim-pivot-grade",
                        texts="the query's pivot passage", cut="cut", target="cut_target",
                        no_map="P(relevant): this server was started without --calibration MAP.json", top_k="top_n",
                        own_passages="this server's --passages", allow="start the server with --allow-map-mismatch",
                        applied_to="this request",
                        zscore="this server starts ratings from the scores as they are (init score): send positive "
                               "scores, or none",
                        give_map="--calibration MAP.json",
                        map_zscore="this server's --calibration map was fit with init score, so its ratings start from "
                                   "the scores as they are: send positive scores, or none"),
}


def zscore_way(calibration: Any, said: Spelling) -> str:
    """The way out for first-stage scores that init score cannot start a rating from (negative ones, a cosine's), in
    the entrance's words: init zscore, or where a map fit with init score keeps it, other scores or another map."""
    if calibration is not None and calibration.fit.get("init") == "score":
        return said.map_zscore
    return said.zscore


def pivoted(strategy: Any, said: Spelling) -> Any:
    """The strategy with a pivot in every window (a method that rates none is refused in one line): the first of a
    pivot's rules, at every entrance."""
    if not hasattr(strategy, "with_pivot"):
        raise InputError(f"{said.pivot}: method {strategy.name!r} rates no pivot (the acurank methods do)")
    return strategy.with_pivot()


def check_pivot(given: bool, passages: Any, calibration: CalibrationMap | None, said: Spelling) -> None:
    """A pivot's other rules, after the method's (:func:`pivoted`) and after the map's own (:func:`check_applicable`),
    at every entrance: a pivot joins windows of documents ranked whole; a map fit with a pivot reads where each
    document stands against one, so it needs one, and a map fit without one reads none (``calibration``: the map
    applied; None: none, or a map being fit)."""
    if given and passages is not None:
        raise InputError(f"{said.pivot} with {said.passages}: a pivot joins windows of documents ranked whole")
    if calibration is not None and calibration.pivoted != given:
        raise InputError(f"{said.calibration}: " + (
            f"the map was fit with a pivot in every window, and {said.this} has none: give {said.pivot}"
            if not given else
            f"the map was fit without a pivot, and {said.this} has one: leave {said.pivot} out, or fit a map with one"))


@dataclass(frozen=True)
class Pivot:
    """A reference player in every window (``--pivot``): ``simulated`` (the simulated reranker's document of grade
    --sim-pivot-grade) or a file of ``qid<TAB>passage`` (a pivot passage written for each query, for the rerankers
    that read texts)."""

    source: str
    #: each query's pivot passage (None: the simulated reranker's)
    texts: Mapping[str, str] | None = None

    @classmethod
    def of(cls, value: str | None) -> "Pivot | None":
        if value is None:
            return None
        if value == "simulated":
            return cls(value)
        if not value.strip():  # a blank path reads as the working folder: said as the flag's, not as a folder's
            raise InputError(f"--pivot {value!r}: give simulated or a file of 'qid<TAB>pivot passage'")
        from ..io.collection_files import read_topics

        return cls(value, read_topics(value, ("the pivot of query", "pivot passage")))

    @classmethod
    def given(cls, texts: Mapping[str, str], said: Spelling) -> "Pivot":
        """Each query's pivot as the API and a server request give it: its passage, or ``"simulated"`` for the
        simulated reranker's pivot (every query's)."""
        if all(t == "simulated" for t in texts.values()):
            return cls("simulated")
        return cls(said.pivot, dict(texts))

    def described(self) -> str:
        """What the run's fingerprint records: ``simulated``, or the passages' digest."""
        if self.texts is None:
            return "simulated"
        return hashlib.sha256(json.dumps(self.texts, sort_keys=True).encode()).hexdigest()[:16]

    def add_texts(self, needs_texts: bool, backend: str, qids: Sequence[str], docs: dict,
                  said: Spelling = SAID["cli"]) -> None:
        """Checked against the backend and the queries (one line each, before any call); for passages, every query's
        pivot passage is added to ``docs`` under its pivot id."""
        from ..records import Doc, pivot_id

        if self.texts is None and needs_texts:
            raise InputError(f"{said.simulated} is the simulated reranker's pivot; reranker {backend} reads texts: "
                             f"give {said.texts}")
        if self.texts is not None and not needs_texts:
            raise InputError(f"{said.pivot}{' ' + self.source if said.pivot.startswith('--') else ''}: the simulated "
                             f"reranker reads no texts; give {said.simulated} (its grade: {said.grade})")
        if self.texts is not None:
            missing = [q for q in qids if q not in self.texts]
            if missing:
                raise InputError(f"no pivot passage for query {missing[0]} ({len(missing)} queries without one)",
                                 self.source)
            for q in qids:
                docs[pivot_id(q)] = Doc(pivot_id(q), self.texts[q])
