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
from typing import Iterator

from ..errors import InputError
from .plan import FilePlan, replacing
from .meta_file import MetaFile
from .run_files import command_part, cut_to_nothing, stats_path_for


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
    #: the digest of the command that made it, without its query set (every part of one command shares it)
    command_digest: str | None = None
    #: the software and model it was made with (None: not recorded)
    provenance: dict | None = None


def read_part(path: str) -> Part:

    run = Path(path)
    if not run.is_file():
        raise InputError("no such run", path)
    try:
        recorded = MetaFile.read(run)
        shard = recorded.shard
        part = Part(run, stats_path_for(run) if stats_path_for(run).exists() else None,
                    Shard(int(shard["index"]), int(shard["of"])), tuple(shard["queries"]), recorded.fingerprint,
                    command_digest=recorded.command_digest, provenance=recorded.provenance)
    except (OSError, ValueError, KeyError, TypeError):
        name = MetaFile.path_for(run).name
        raise InputError(f"{name} does not describe a shard (was the run made with --shard I/N?)", path) from None
    return part


def _blocks(path: Path, key) -> Iterator[tuple[str, str]]:
    """(qid, its lines) for each run of consecutive lines of one query (``key(line)`` -> qid), as they come."""
    qid, lines = None, []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            q = key(line)
            if q != qid and lines:
                yield qid, "".join(lines)
                lines = []
            qid = q
            lines.append(line if line.endswith("\n") else line + "\n")
    if lines:
        yield qid, "".join(lines)


def _in_order(path: Path, key, order: list[str]) -> Iterator[tuple[str, str]]:
    """A part's blocks in ``order`` (the unsharded input's, which a part keeps): streamed, one block held, when the
    file has them so (a part as rerank writes it); else held whole and put in order."""
    found = [q for q, _ in _blocks(path, key)]
    rank = {q: i for i, q in enumerate(order)}
    if len(set(found)) == len(found) and found == sorted(found, key=lambda q: rank.get(q, -1)):
        yield from _blocks(path, key)
        return
    held: dict[str, str] = {}
    for q, text in _blocks(path, key):
        held[q] = held.get(q, "") + text
    yield from ((q, held[q]) for q in order if q in held)


def _joined(parts: list[Part], order: list[str], key, path_of) -> Iterator[str]:
    """The parts' blocks in the unsharded input's ``order``: each query's next block is taken from its shard's
    stream (a query no part holds, skipped by its shard, is left out)."""
    streams = {p.shard.index: _in_order(path_of(p), key, [q for q in order if p.shard.holds(q)]) for p in parts}
    ahead = {i: next(stream, None) for i, stream in streams.items()}
    of = parts[0].shard.of
    for q in order:
        i = shard_of(q, of)
        if ahead[i] is not None and ahead[i][0] == q:
            yield ahead[i][1]
            ahead[i] = next(streams[i], None)


def merge(paths: list[str], output: str, overwrite: bool = False) -> tuple[int, int]:
    """Join the parts into ``output`` (and its stats beside it when every part has stats), the queries in the
    unsharded input's order; an existing output is replaced only with ``overwrite``. Returns (queries, parts)."""

    parts = [read_part(p) for p in paths]
    plan = FilePlan()
    for p in parts:
        plan.read("PART", p.run).read("(the stats beside PART)", p.stats).read("(the meta file beside PART)",
                                                                                MetaFile.path_for(p.run))
    plan.write("--output", output).write("(the meta file of --output)", MetaFile.path_for(output), may_exist=True)
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
    order = list(first.queries)
    run_key, stats_key = (lambda line: line.split(maxsplit=1)[0]), (lambda line: json.loads(line)["qid"])
    queries = 0
    for p in parts:  # every part finished: checked before anything is written, holding only query ids
        wanted = [q for q in order if p.shard.holds(q)]
        have = {q for q, _ in _blocks(p.run, run_key)} | cut_to_nothing(p.stats)  # a query cut to nothing: done
        lacking = [q for q in wanted if q not in have]
        if lacking:
            raise InputError(f"is unfinished: {len(lacking)} of its {len(wanted)} queries are missing (e.g. "
                             f"{lacking[0]}); rerun its command to finish it", str(p.run))
        queries += len(have)
    with replacing(output) as fh:  # one query's block in memory at a time
        fh.writelines(_joined(parts, order, run_key, lambda p: p.run))
    if all(p.stats is not None for p in parts):
        with replacing(stats_path_for(output)) as fh:
            fh.writelines(_joined(parts, order, stats_key, lambda p: p.stats))
    merged_meta(parts, queries).write(output)
    return queries, len(parts)


def merged_meta(parts: list[Part], queries: int) -> MetaFile:
    """The meta file of a merged run: the command every part was made by (its fingerprint without the query set, and
    its digest, which the stats records carry: eval and report refuse another run's stats against it), the number of
    queries, and the parts it was merged from (``merged``: a run no one command made, which a resume refuses); the
    software and model, where every part's agree."""
    first = parts[0]
    fingerprint = command_part(first.fingerprint)
    fingerprint["inputs"]["queries"] = queries
    merged = {"of": first.shard.of, "parts": [str(p.run) for p in sorted(parts, key=lambda p: p.shard.index)]}
    return MetaFile(fingerprint, None, first.command_digest, _shared(parts), other={"merged": merged})


#: what each part's provenance holds of its own job (when and how it was started, its inputs' files)
_OWN_JOB = ("started", "resumed", "command", "inputs")


def _shared(parts: list[Part]) -> dict | None:
    """The software and model every part was made with, where they all agree (then with the first part's start);
    None where they differ (parts made on other machines or engines: each part's meta file says its own)."""
    kept = [None if p.provenance is None else {k: v for k, v in p.provenance.items() if k not in _OWN_JOB}
            for p in parts]
    if kept[0] is None or any(k != kept[0] for k in kept):
        return None
    first = min(parts, key=lambda p: p.shard.index)
    return {**kept[0], **({"started": first.provenance["started"]} if "started" in first.provenance else {})}


__all__ = ["Part", "Shard", "merge", "merged_meta", "read_part", "shard_of"]
