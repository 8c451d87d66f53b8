"""Append-only outputs (run, stats, trace) that survive Ctrl-C / kill -9 and resume where they stopped.

These are the writers that append, and why that is safe: each query's block is written with one ``write`` and
flushed, the run block last (it marks the query done), so a crash leaves at most one partial block at the
end; a run is continued only when the meta file beside it records the same command (fingerprint), and on
resume only complete query blocks are kept (the run, stats and trace are first rewritten whole, through a
temporary file). Which files may be written at all is decided before, by :class:`~.plan.FilePlan`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..errors import InputError
from ..records import StatsRecord
from .plan import is_regular_or_absent, write_whole


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


def read_stats(path: str | Path) -> dict[str, StatsRecord]:
    """The one stats reader: a per-query stats JSONL file -> {qid: StatsRecord}; a later record for a qid
    wins (a resumed run appends)."""
    from .readers import open_text

    out: dict[str, StatsRecord] = {}
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = StatsRecord.from_json(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                raise InputError("bad stats record (expected JSON with 'qid' and 'calls')", str(path), lineno) from None
            out[rec.qid] = rec
    return out


def meta_path_for(run_path: str | Path) -> Path:
    """The fingerprint file beside a run: ``X.run`` -> ``X.run.meta.json``."""
    p = Path(run_path)
    return p.with_name(p.name + ".meta.json")


@dataclass(frozen=True)
class RunMeta:
    """What a run's ``X.run.meta.json`` says about it: the queries it was made for and its reranker."""

    path: Path
    expected_queries: int | None
    backend: str | None

    @property
    def simulated(self) -> bool:
        """Made by the simulated reranker (a qrels oracle), not a model."""
        return self.backend == "simulated"


def _recorded_fingerprint(meta: Path) -> dict:
    """The fingerprint a run's meta file records (raises OSError/ValueError/KeyError/TypeError as found)."""
    return json.loads(meta.read_text(encoding="utf-8"))["fingerprint"]


def read_run_meta(run_path: str | Path) -> RunMeta | None:
    """The meta file beside a run, or None when there is none (a run made elsewhere) or it is unreadable."""
    if str(run_path) == "-":
        return None
    meta = meta_path_for(run_path)
    try:
        fp = _recorded_fingerprint(meta)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    inputs = fp.get("inputs") or {}
    reranker = fp.get("reranker") or {}
    queries = inputs.get("queries")
    return RunMeta(meta, int(queries) if isinstance(queries, int) else None,
                   reranker.get("backend") if isinstance(reranker, dict) else None)


def unfinished(run_path: str | Path, queries: int) -> str | None:
    """``"18 of 54 queries"`` when the run's meta says it was made for more queries than it holds."""
    meta = read_run_meta(run_path)
    if meta is None or meta.expected_queries is None or queries >= meta.expected_queries:
        return None
    return f"{queries} of {meta.expected_queries} queries"


def complete_run_blocks(path: Path, expected: dict[str, int], tag: str) -> dict[str, str]:
    """Complete query blocks already in a run file (qid -> text), checking the tag matches."""
    blocks: dict[str, list[str]] = {}
    with path.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                break  # torn last line
            parts = line.split()
            if len(parts) != 6:
                break
            if parts[5] != tag:
                raise InputError(
                    f"existing output has run tag {parts[5]!r}, this command writes {tag!r}; "
                    "use --overwrite to start afresh (or another --output)",
                    str(path),
                    lineno,
                )
            blocks.setdefault(parts[0], []).append(line)
    return {q: "".join(v) for q, v in blocks.items() if q in expected and len(v) == expected[q]}


def _check_fingerprint(path: Path, meta: Path, fingerprint) -> None:
    advice = "use --overwrite to start afresh, or another --output"
    try:
        recorded = _recorded_fingerprint(meta)
    except FileNotFoundError:
        raise InputError(f"exists, but {meta.name} (what made it) does not, so it cannot be resumed safely; {advice}",
                         str(path)) from None
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{meta.name} is unreadable, so the run cannot be resumed safely; {advice}", str(path)) from None
    diffs = fingerprint.differences(recorded)
    if diffs:
        shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
        raise InputError(f"was made with other settings ({shown}); {advice}", str(path))


def recorded_provenance(run_path: str | Path) -> dict | None:
    """The provenance the meta file beside a run records (None: no meta file, or made before it was recorded)."""
    try:
        return json.loads(meta_path_for(run_path).read_text(encoding="utf-8")).get("provenance")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass
class RunOutputs:
    """The run (file or stdout) plus optional stats/trace JSONL, appended query by query."""

    output: str | None
    stats: str | None = None
    trace: str | None = None
    order: list[str] = field(default_factory=list)
    _fh: dict[str, TextIO] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    resumed: bool = False

    def open(self, expected: dict[str, int], tag: str, overwrite: bool, fingerprint=None,
             described: dict | None = None) -> set[str]:
        """Open outputs; returns the qids already complete (resume) unless ``overwrite``.

        A resume continues only when ``fingerprint`` (a RunFingerprint) matches the one recorded
        beside the run; the fingerprint is (re)written there either way, with ``described`` (more
        about the run for other commands: a shard's place, see :mod:`acurank_cli.run.shard`).
        """
        self.order = list(expected)
        if self.output and self.output != "-" and not is_regular_or_absent(self.output):
            self._fh["run"] = open(self.output, "w", encoding="utf-8")  # a device or FIFO: no resume, no meta
        elif self.output and self.output != "-":
            path = Path(self.output)
            meta = meta_path_for(path)
            if path.exists() and path.stat().st_size > 0 and not overwrite:
                if fingerprint is not None:
                    _check_fingerprint(path, meta, fingerprint)
                kept = complete_run_blocks(path, expected, tag)
                self.done = set(kept)
                self.resumed = True
                write_whole(path, "".join(kept[q] for q in self.order if q in kept))
            if fingerprint is not None:
                write_whole(meta, json.dumps({"fingerprint": fingerprint.as_dict(), "digest": fingerprint.digest,
                                               **(described or {})}, indent=1, sort_keys=True) + "\n")
            self._fh["run"] = path.open("w" if overwrite or not self.resumed else "a", encoding="utf-8")
        else:
            self._fh["run"] = sys.stdout
        for key, name in (("stats", self.stats), ("trace", self.trace)):
            if not name:
                continue
            path = Path(name)
            if self.resumed and path.exists():
                self._keep_done_records(path)
                self._fh[key] = path.open("a", encoding="utf-8")
            else:
                self._fh[key] = path.open("w", encoding="utf-8")
        return set(self.done)

    def _keep_done_records(self, path: Path) -> None:
        lines = []
        with path.open("r", encoding="utf-8") as fh:
            for line in fh:
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
            self._fh["trace"].flush()
        if "stats" in self._fh and stats is not None:
            self._fh["stats"].write(json.dumps(stats) + "\n")
            self._fh["stats"].flush()
        self._fh["run"].write(run_text)
        self._fh["run"].flush()
        self.done.add(qid)

    def close(self) -> None:
        """Close files; after a resumed run, rewrite the run in input query order."""
        for key, fh in self._fh.items():
            if fh is not sys.stdout:
                fh.close()
        self._fh.clear()
        if self.resumed and self.done >= set(self.order):
            path = Path(self.output)
            groups: dict[str, list[str]] = {}
            with path.open("r", encoding="utf-8") as fh:
                for line in fh:
                    groups.setdefault(line.split(maxsplit=1)[0], []).append(line)
            write_whole(path, "".join("".join(groups.get(q, [])) for q in self.order))

