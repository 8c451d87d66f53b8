"""Which runs to report on: datasets (each with qrels), methods (each a TREC run, maybe with stats).

Runs are named in two ways, which combine:

* a directory layout ``DIR/<dataset>/<method>.run`` (``.run.gz`` too) with ``DIR/<dataset>/qrels.txt``
  (and optionally ``topics.tsv``); a directory that itself holds ``*.run`` files is one dataset named
  after the directory;
* explicit ``--run DATASET:METHOD=PATH`` and ``--qrels DATASET=PATH`` (the dataset may be left out when
  there is only one); without ``--qrels``, the qrels file beside the dataset's runs (when they agree on one).

The stats file of ``X.run`` is ``X.stats.jsonl`` beside it (used when present); ``--stats
DATASET:METHOD=PATH`` overrides. The first-stage run (``bm25`` by default) costs no reranker calls, so
it needs no stats; it is also where WIG takes its scores from.

Queries: the effectiveness measure is computed over the qrels' queries (a query missing from a run
scores 0, as ``trec_eval -c``); mean costs are over the judged queries found in the stats file.
"""

from __future__ import annotations

import math
import re
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import InputError
from ..evaluation import DEFAULT_MEASURE, check_judged, evaluate, measure_name
from ..io.meta_file import MetaFile
from ..io.run_files import cut_to_nothing, method_name_of, stats_of_run, stats_path_for
from ..io.collection_files import read_qrels, read_topics
from ..io.runs import read_run, read_scores
from ..io.plan import FilePlan
from ..records import Run, StatsRecord

#: Cost measures a stats file can provide (x axes of the Pareto plot).
COST_KINDS = ("calls", "tokens", "seconds", "rounds", "flops")
#: Every per-query figure a stats file can provide (the efficiency table's columns).
STAT_KINDS = (*COST_KINDS, "input_tokens", "output_tokens", "thinking_tokens", "window", "cached")
QRELS_NAMES = ("qrels.txt", "qrels.txt.gz", "qrels", "qrels.tsv")
TOPICS_NAMES = ("topics.tsv", "topics.tsv.gz", "topics.txt")


def _record_cost(rec: StatsRecord, kind: str) -> float | None:
    """One query's cost of the given kind from its stats record (None when the record lacks it)."""
    if kind == "window":  # the mean size of the windows sent (a query without calls has none)
        sizes = rec.window_sizes
        return sum(sizes) / len(sizes) if sizes else None
    if kind in ("tokens", "input_tokens", "output_tokens") and rec.calls and not (rec.input_tokens or rec.output_tokens):
        return None  # calls that counted no token (a reranker that counts none): unknown, not 0, as its money is
    value = {"calls": rec.calls, "cached": rec.cached_calls, "tokens": rec.tokens, "seconds": rec.seconds, "rounds": rec.rounds, "flops": rec.flops,
             "input_tokens": rec.input_tokens, "output_tokens": rec.output_tokens,
             "thinking_tokens": rec.reasoning_tokens or 0}[kind]
    return None if value is None else float(value)


@dataclass
class MethodRun:
    """One method's run on one dataset, with its stats file if any (both read lazily) and its trace, where a report
    draws one (``report html``)."""

    dataset: str
    method: str
    run_path: Path
    stats_path: Path | None = None
    first_stage: bool = False
    trace_path: Path | None = None
    _scores: dict | None = field(default=None, repr=False)
    _stats: dict | None = field(default=None, repr=False)
    _emptied: set | None = field(default=None, repr=False)

    def emptied(self) -> set[str]:
        """The queries its stats record as cut to nothing (:func:`~acurank_cli.io.run_files.cut_to_nothing`: finished,
        with no line), read once."""
        if self._emptied is None:
            self._emptied = cut_to_nothing(self.stats_path)
        return self._emptied

    def candidates(self) -> Run:
        """Per query, the run's documents in trec_eval order (read again at each call: WIG's first stage)."""
        return read_run(self.run_path)

    def run_dict(self) -> dict[str, dict[str, float]]:
        """qid -> docid -> score, for evaluation: the one copy of the run a report holds (read once, kept)."""
        if self._scores is None:
            self._scores = read_scores(self.run_path, empty_ok=bool(self.emptied()))
        return self._scores

    def stats(self) -> dict[str, StatsRecord] | None:
        """Per-query stats records, or None when the run has no stats file; checked to be the run's own
        (:func:`~acurank_cli.io.run_files.stats_of_run`: another run's refused, a gap said on stderr)."""
        if self._stats is None and self.stats_path is not None:
            self._stats, gap = stats_of_run(self.stats_path, self.run_path, set(self.run_dict()))
            if gap:
                print(f"acurank: {gap}", file=sys.stderr)
        return self._stats

    def cost(self, kind: str) -> dict[str, float] | None:
        """qid -> cost (calls, tokens = input + output, or wall seconds); None when unknown.

        The first-stage run costs nothing (no reranking) unless it has stats of its own."""
        if kind not in STAT_KINDS:
            raise InputError(f"unknown cost {kind!r}; choose one of {', '.join(COST_KINDS)}")
        stats = self.stats()
        if stats is None:
            return {q: 0.0 for q in self.run_dict()} if self.first_stage else None
        out = {}
        for qid, rec in stats.items():
            value = _record_cost(rec, kind)
            if value is None:
                if kind == "window" and rec.calls == 0:
                    continue  # no window sent: nothing to average
                return None
            out[qid] = value
        return out


@dataclass
class DatasetRuns:
    """One dataset: its qrels (and optional topics) plus the runs of every method on it."""

    name: str
    qrels_path: Path | None = None
    topics_path: Path | None = None
    runs: dict[str, MethodRun] = field(default_factory=dict)
    _qrels: dict | None = field(default=None, repr=False)
    _topics: dict | None = field(default=None, repr=False)

    def qrels(self) -> dict[str, dict[str, int]]:
        """The dataset's qrels (read once)."""
        if self._qrels is None:
            if self.qrels_path is None:
                raise InputError(
                    f"dataset {self.name!r} has no qrels: put qrels.txt beside its runs or pass --qrels {self.name}=PATH"
                )
            self._qrels = read_qrels(self.qrels_path)
        return self._qrels

    def topics(self) -> dict[str, str] | None:
        """The dataset's topics (qid -> text) when a topics file is known, else None."""
        if self._topics is None and self.topics_path is not None:
            self._topics = read_topics(self.topics_path)
        return self._topics


@dataclass
class Collection:
    """Datasets x methods, with per-query effectiveness and costs computed on demand (cached)."""

    datasets: dict[str, DatasetRuns]
    first_stage: str = "bm25"
    measure: str = DEFAULT_MEASURE
    rel_level: int = 1
    method_order: list[str] | None = None  # as given by --method; None = not given
    _eval: dict = field(default_factory=dict, repr=False)

    def measured_by(self, measure: str) -> "Collection":
        """The same runs (each file read once, whatever the measures) evaluated by another measure."""
        return replace(self, measure=measure_name(measure), _eval={})

    def read_by(self, plan: "FilePlan") -> "FilePlan":
        """Name every file the report reads in ``plan``: runs, stats, qrels and topics."""
        for ds in self.datasets.values():
            plan.read(f"(the qrels of {ds.name})", ds.qrels_path).read(f"(the topics of {ds.name})", ds.topics_path)
            for mr in ds.runs.values():
                plan.read(f"(the run {ds.name}:{mr.method})", mr.run_path)
                plan.read(f"(the stats of {ds.name}:{mr.method})", mr.stats_path)
        return plan

    def methods(self) -> list[str]:
        """Every method present in some dataset: in --method order if given, else sorted by name."""
        if self.method_order is not None:
            return list(self.method_order)
        seen = {m for d in self.datasets.values() for m in d.runs}
        return sorted(seen, key=natural_key)

    def has(self, dataset: str, method: str) -> bool:
        """Whether ``method`` has a run on ``dataset``."""
        return method in self.datasets[dataset].runs

    def run(self, dataset: str, method: str) -> MethodRun:
        """The run of ``method`` on ``dataset`` (InputError when there is none)."""
        try:
            return self.datasets[dataset].runs[method]
        except KeyError:
            raise InputError(f"no run for method {method!r} on dataset {dataset!r}") from None

    def per_query(self, dataset: str, method: str) -> dict[str, float]:
        """qid -> effectiveness over the qrels' queries (missing from the run -> 0)."""
        key = (dataset, method)
        if key not in self._eval:
            ds = self.datasets[dataset]
            ev = evaluate(self.run(dataset, method).run_dict(), ds.qrels(), [self.measure], self.rel_level)
            self._eval[key] = {q: v[self.measure] for q, v in ev.per_query.items()}
        return self._eval[key]

    def mean(self, dataset: str, method: str) -> float:
        """Mean effectiveness over the qrels' queries."""
        values = self.per_query(dataset, method)
        return statistics.fmean(values.values()) if values else float("nan")

    def per_query_cost(self, dataset: str, method: str, kind: str = "calls") -> dict[str, float] | None:
        """qid -> cost over the judged queries found in the stats (None when the cost is unknown)."""
        cost = self.run(dataset, method).cost(kind)
        if cost is None:
            return None
        judged = self.datasets[dataset].qrels()
        return {q: v for q, v in cost.items() if q in judged}

    def mean_cost(self, dataset: str, method: str, kind: str = "calls") -> float | None:
        """Mean cost per judged query (None when unknown)."""
        cost = self.per_query_cost(dataset, method, kind)
        if not cost:
            return None
        return statistics.fmean(cost.values())


def natural_key(name: str) -> list:
    """Sort key treating digit runs as numbers (sw-2 before sw-10)."""
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", name)]


def macro(values: Sequence[float | None]) -> float | None:
    """Unweighted mean over datasets; None when any dataset's value is missing."""
    if not values or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return None
    return statistics.fmean(values)


# ------------------------------------------------------------------------------------- building


def split_spec(spec: str, option: str) -> tuple[str | None, str]:
    """``NAME=PATH`` -> (NAME, PATH); ``PATH`` (no '=' or a '/' before it) -> (None, PATH)."""
    name, sep, path = spec.partition("=")
    if not sep or "/" in name or "\\" in name:
        return None, spec
    if not name or not path:
        raise InputError(f"{option} {spec!r}: expected NAME=PATH")
    return name, path


def split_run_spec(spec: str, option: str) -> tuple[str | None, str, str]:
    """``DATASET:METHOD=PATH`` or ``METHOD=PATH`` -> (dataset or None, method, path)."""
    name, path = split_spec(spec, option)
    if name is None:
        raise InputError(f"{option} {spec!r}: expected DATASET:METHOD=PATH (or METHOD=PATH with one dataset)")
    dataset, sep, method = name.rpartition(":")
    if sep and (not dataset or not method):
        raise InputError(f"{option} {spec!r}: expected DATASET:METHOD=PATH")
    return (dataset or None), method, path


def _existing(path: str | Path, option: str) -> Path:
    """A file named by ``option``: a regular file, or one read as it streams (a FIFO, ``<(...)``)."""
    p = Path(path)
    if not p.exists() or p.is_dir():
        raise InputError(f"{option}: no such file", str(p))
    return p


def _first_existing(folder: Path, names: Iterable[str]) -> Path | None:
    for n in names:
        if (folder / n).is_file():
            return folder / n
    return None


def _run_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and method_name_of(p))


def _qrels_in(folder: Path) -> Path | None:
    """The qrels file of a folder of runs: one of QRELS_NAMES, else its only ``qrels*`` file."""
    named = _first_existing(folder, QRELS_NAMES)
    if named is not None:
        return named
    found = [p for p in sorted(folder.glob("qrels*")) if p.is_file()]
    return found[0] if len(found) == 1 else None


def _scan_dataset(name: str, folder: Path) -> DatasetRuns:
    ds = DatasetRuns(name, _qrels_in(folder), _first_existing(folder, TOPICS_NAMES))
    for path in _run_files(folder):
        method = method_name_of(path)
        stats = stats_path_for(path)
        ds.runs[method] = MethodRun(name, method, path, stats if stats.is_file() else None)
    return ds


def scan_directory(root: str | Path) -> dict[str, DatasetRuns]:
    """Datasets found under ``root``: ``root/<dataset>/<method>.run``, or ``root`` itself as one dataset."""
    root = Path(root)
    if not root.is_dir():
        raise InputError("--runs: not a directory", str(root))
    if _run_files(root):
        return {root.resolve().name: _scan_dataset(root.resolve().name, root)}
    found = {}
    for sub in sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: natural_key(p.name)):
        if _run_files(sub):
            found[sub.name] = _scan_dataset(sub.name, sub)
    if not found:
        raise InputError("--runs: no runs found (expected DIR/<dataset>/<method>.run)", str(root))
    return found


def _check_runs(found: dict[str, DatasetRuns]) -> None:
    """Refuse an unfinished run (its meta file says it was made for more queries than it holds: its
    calls would average over fewer queries than its nDCG); warn when oracle (simulated) runs and
    model runs meet in one report."""
    kinds: dict[str, list[str]] = {"simulated": [], "model": []}
    for ds in found.values():
        for method, mr in ds.runs.items():
            meta = MetaFile.find(mr.run_path)
            if meta is None:
                continue
            mr.stats()  # checked to be the run's first: another run's would count its queries as the run's
            held = set(mr.run_dict()) | mr.emptied()  # a query cut to nothing is finished
            left = meta.unfinished(len(held))
            if left:
                raise InputError(f"{ds.name}/{method}: {mr.run_path} is unfinished ({left}); finish it (rerun its "
                                 "rerank command) or leave it out, so that every column covers the same queries")
            kinds["simulated" if meta.simulated else "model"].append(f"{ds.name}/{method}")
    for ds in found.values():  # coverage: a run over part of the qrels' queries scores 0 on the rest
        if ds.qrels_path is None:
            continue
        judged = set(ds.qrels())
        for method, mr in ds.runs.items():
            held = [*mr.run_dict(), *sorted(mr.emptied() - set(mr.run_dict()))]  # a query cut to
            check_judged(held, ds.qrels(), str(ds.qrels_path), str(mr.run_path))  # nothing counts 0; none shared: refused
            shared = len(judged & set(held))
            if shared < len(judged):
                print(f"acurank: warning: {ds.name}/{method}: {shared} of the {len(judged)} qrels queries are in the "
                      "run; the others count as 0", file=sys.stderr)
    if kinds["simulated"] and kinds["model"]:
        print(f"acurank: warning: this report mixes runs of the simulated reranker (a qrels oracle: "
              f"{', '.join(kinds['simulated'][:4])}{', ...' if len(kinds['simulated']) > 4 else ''}) with model runs "
              f"({', '.join(kinds['model'][:4])}{', ...' if len(kinds['model']) > 4 else ''})", file=sys.stderr)


def _named_files(found: dict[str, DatasetRuns], qrels: Sequence[str], topics: Sequence[str], runs: Sequence[str],
                 stats: Sequence[str]) -> None:
    """Add the files named one by one (--qrels, --topics, --run, --stats) to the datasets ``found`` in folders; an
    unnamed dataset is the only one there is (an error otherwise)."""

    def sole(option: str, spec: str) -> str:
        if len(found) == 1:
            return next(iter(found))
        known = ", ".join(found) or "none yet"
        raise InputError(f"{option} {spec!r}: name the dataset (datasets: {known})")

    unnamed_qrels = []
    for spec in qrels:
        name, path = split_spec(spec, "--qrels")
        if name is None:
            unnamed_qrels.append((spec, path))
            continue
        found.setdefault(name, DatasetRuns(name)).qrels_path = _existing(path, "--qrels")
    for spec, path in unnamed_qrels:
        if not found:
            p = _existing(path, "--qrels")
            name = p.resolve().parent.name or "dataset"
            found[name] = DatasetRuns(name)
        found[sole("--qrels", spec)].qrels_path = _existing(path, "--qrels")
    for spec in topics:
        name, path = split_spec(spec, "--topics")
        name = name or sole("--topics", spec)
        found.setdefault(name, DatasetRuns(name)).topics_path = _existing(path, "--topics")
    explicit = [split_run_spec(spec, "--run") + (spec,) for spec in runs]
    for ds_name, method, path, _ in explicit:
        if ds_name is not None:
            found.setdefault(ds_name, DatasetRuns(ds_name))
    for ds_name, method, path, spec in explicit:
        ds_name = ds_name or sole("--run", spec)
        p = _existing(path, "--run")
        st = stats_path_for(p)
        found[ds_name].runs[method] = MethodRun(ds_name, method, p, st if st.is_file() else None)
    for ds in found.values():  # runs named one by one: the qrels beside them, when they agree on one
        if ds.qrels_path is None:
            beside = {q for q in (_qrels_in(r.run_path.parent) for r in ds.runs.values()) if q is not None}
            if len(beside) > 1:
                raise InputError(f"dataset {ds.name!r}: its runs lie beside different qrels files "
                                 f"({', '.join(sorted(map(str, beside)))}): pass --qrels {ds.name}=PATH")
            ds.qrels_path = next(iter(beside), None)
    for spec in stats:
        ds_name, method, path = split_run_spec(spec, "--stats")
        ds_name = ds_name or sole("--stats", spec)
        if ds_name not in found or method not in found[ds_name].runs:
            raise InputError(f"--stats {spec!r}: no run for method {method!r} on dataset {ds_name!r}")
        found[ds_name].runs[method].stats_path = _existing(path, "--stats")


def build_collection(
    *,
    dirs: Sequence[str] = (),
    runs: Sequence[str] = (),
    qrels: Sequence[str] = (),
    stats: Sequence[str] = (),
    topics: Sequence[str] = (),
    datasets: Sequence[str] = (),
    methods: Sequence[str] = (),
    first_stage: str = "bm25",
    measure: str = DEFAULT_MEASURE,
    rel_level: int = 1,
) -> Collection:
    """Assemble a :class:`Collection` from directories and explicit specs (see the module docstring)."""
    found: dict[str, DatasetRuns] = {}
    for d in dirs:
        for name, ds in scan_directory(d).items():
            if name in found:
                found[name].runs.update(ds.runs)
                found[name].qrels_path = ds.qrels_path or found[name].qrels_path
                found[name].topics_path = ds.topics_path or found[name].topics_path
            else:
                found[name] = ds
    _named_files(found, qrels, topics, runs, stats)
    return assembled(found, datasets, methods, first_stage=first_stage, measure=measure, rel_level=rel_level)


def assembled(found: dict[str, DatasetRuns], datasets: Sequence[str] = (), methods: Sequence[str] = (), *,
              first_stage: str = "bm25", measure: str = DEFAULT_MEASURE, rel_level: int = 1) -> Collection:
    """The :class:`Collection` of the datasets ``found`` (by :func:`build_collection`, or given as records: ``report
    html``'s runs), each run checked (:func:`_check_runs`); ``datasets`` and ``methods`` restrict and order them."""
    if datasets:
        missing = [d for d in datasets if d not in found]
        if missing:
            raise InputError(f"--dataset {missing[0]!r} not found (datasets: {', '.join(found) or 'none'})")
        found = {d: found[d] for d in datasets}
    found = {k: v for k, v in found.items() if v.runs or datasets}
    if not found:
        raise InputError("no runs given: use --runs DIR (DIR/<dataset>/<method>.run) or --run DATASET:METHOD=PATH")
    for ds in found.values():
        if ds.qrels_path is None:
            ds.qrels()  # raises the explanatory error
        if first_stage in ds.runs:
            ds.runs[first_stage].first_stage = True
    _check_runs(found)
    order = None
    if methods:
        known = {m for d in found.values() for m in d.runs}
        for m in methods:
            if m not in known:
                raise InputError(f"--method {m!r} has no run (methods: {', '.join(sorted(known, key=natural_key))})")
        order = list(dict.fromkeys(methods))  # rows shown; other runs stay loadable (baselines, WIG)
    return Collection(found, first_stage, measure_name(measure), rel_level, order)
