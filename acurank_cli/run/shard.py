"""Sharded runs: ``rerank/baseline --shard I/N`` reranks one deterministic part of the queries, and
``acurank merge PART.run... -o RUN`` joins the N parts into the run (and stats) the unsharded command writes.

The split: query ``qid`` belongs to shard ``1 + (the first 8 bytes of sha256(qid), big-endian) mod N``, a
function of the id alone (not of the file's order, the machine or the Python version), so every job of an
array computes the same split. Each part's ``.meta.json`` records its shard and the order of all the
queries of the unsharded input (after ``--qids``), which the merge restores; the parts must be shards 1..N
of one command (the same fingerprint but for the shard), each complete.

Methods that pool information across the queries of a run (``acurank-auto``'s ``--beta-pool run``, the
query-set budget ``--budget-total``) pool within each shard: their sharded run is a different run (use
``--beta-pool query`` for acurank-auto). Per-query methods give the unsharded run, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .fingerprint import command_part


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``of``."""

    index: int
    of: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        index, sep, of = text.partition("/")
        try:
            shard = cls(int(index), int(of))
        except ValueError:
            shard = None
        if not sep or shard is None or not 1 <= shard.index <= shard.of:
            raise InputError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. --shard 2/3")
        return shard

    def holds(self, qid: str) -> bool:
        return shard_of(qid, self.of) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.of}"


def shard_of(qid: str, of: int) -> int:
    """The shard (1..of) of a query id."""
    return 1 + int.from_bytes(hashlib.sha256(qid.encode("utf-8")).digest()[:8], "big") % of


@dataclass(frozen=True)
class Part:
    """One part of a sharded run: its files and what its meta file says."""

    run: Path
    stats: Path | None
    shard: Shard
    queries: tuple[str, ...]  # every query of the unsharded input, in its order
    fingerprint: dict


def read_part(path: str) -> Part:
    from ..io.outputs import meta_path_for, stats_path_for

    run = Path(path)
    meta = meta_path_for(run)
    if not run.is_file():
        raise InputError("no such run", path)
    try:
        recorded = json.loads(meta.read_text(encoding="utf-8"))
        shard = recorded["shard"]
        part = Part(run, stats_path_for(run) if stats_path_for(run).exists() else None,
                    Shard(int(shard["index"]), int(shard["of"])), tuple(shard["queries"]), recorded["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{meta.name} does not describe a shard (was the run made with --shard I/N?)", path) from None
    return part


def _blocks(path: Path, key) -> dict[str, str]:
    """Lines grouped by query (``key(line)`` -> qid), in file order within a query."""
    groups: dict[str, list[str]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                groups.setdefault(key(line), []).append(line if line.endswith("\n") else line + "\n")
    return {q: "".join(lines) for q, lines in groups.items()}


def merge(paths: list[str], output: str, overwrite: bool = False) -> tuple[int, int]:
    """Join the parts into ``output`` (and its stats beside it when every part has stats), the queries in the
    unsharded input's order; an existing output is replaced only with ``overwrite``. Returns (queries, parts)."""
    from ..io.outputs import meta_path_for, stats_path_for
    from ..io.plan import FilePlan, write_whole

    parts = [read_part(p) for p in paths]
    plan = FilePlan()
    for p in parts:
        plan.read("PART", p.run).read("(the stats beside PART)", p.stats).read("(the meta file beside PART)",
                                                                                meta_path_for(p.run))
    plan.write("--output", output)
    if all(p.stats is not None for p in parts):
        plan.write("(the stats beside --output)", stats_path_for(output))
    plan.check(overwrite)
    first = parts[0]
    for p in parts[1:]:
        if p.shard.of != first.shard.of or p.queries != first.queries:
            raise InputError(f"is a shard of another split or input than {first.run} ({p.shard} of other queries)",
                             str(p.run))
        if command_part(p.fingerprint) != command_part(first.fingerprint):
            raise InputError(f"was made by another command than {first.run} (method, reranker or inputs differ)",
                             str(p.run))
    indices = sorted(p.shard.index for p in parts)
    if indices != list(range(1, first.shard.of + 1)):
        missing = sorted(set(range(1, first.shard.of + 1)) - set(indices))
        twice = sorted({i for i in indices if indices.count(i) > 1})
        raise InputError(f"merge needs shards 1..{first.shard.of} once each" + (f"; missing {missing}" if missing else "")
                         + (f"; given twice {twice}" if twice else ""))
    runs: dict[str, str] = {}
    stats: dict[str, str] = {}
    for p in parts:
        wanted = [q for q in first.queries if p.shard.holds(q)]
        blocks = _blocks(p.run, lambda line: line.split(maxsplit=1)[0])
        lacking = [q for q in wanted if q not in blocks]
        if lacking:
            raise InputError(f"is unfinished: {len(lacking)} of its {len(wanted)} queries are missing (e.g. "
                             f"{lacking[0]}); rerun its command to finish it", str(p.run))
        runs.update(blocks)
        if p.stats is not None:
            stats.update(_blocks(p.stats, lambda line: json.loads(line)["qid"]))
    write_whole(Path(output), "".join(runs[q] for q in first.queries if q in runs))
    if all(p.stats is not None for p in parts):
        write_whole(stats_path_for(output), "".join(stats[q] for q in first.queries if q in stats))
    return len(runs), len(parts)


__all__ = ["Part", "Shard", "merge", "read_part", "shard_of"]
