"""Sharded runs: --shard I/N splits the queries by a hash of the id; acurank merge joins the parts into the run
the unsharded command writes (byte for byte) and its stats (equal but for what differs between any two runs of
one command: the wall-clock seconds)."""

from __future__ import annotations

import hashlib
import json

import pytest

from acurank_cli.io.shards import Shard, shard_of
from conftest import acurank

RUN_SPECIFIC = ("rerank_seconds", "seconds")  # the clock: different in any two runs of one command


def test_the_split_is_a_hash_of_the_id_alone():
    # by hand: shard = 1 + (first 8 bytes of sha256, big-endian) mod N
    digest = hashlib.sha256(b"19335").digest()[:8]
    assert shard_of("19335", 3) == 1 + int.from_bytes(digest, "big") % 3
    assert shard_of("19335", 1) == 1
    qids = [str(i) for i in range(3000)]
    sizes = [sum(shard_of(q, 3) == i for q in qids) for i in (1, 2, 3)]
    assert sum(sizes) == 3000 and min(sizes) > 900  # every query in exactly one shard, roughly even
    assert Shard.parse("2/3") == Shard(2, 3) and Shard(2, 3).holds("x") == (shard_of("x", 3) == 2)
    for bad in ("0/3", "4/3", "3", "a/b", "1/0", "-1/2"):
        with pytest.raises(ValueError, match="--shard"):
            Shard.parse(bad)


def _stats(path):
    return [{k: v for k, v in json.loads(line).items() if k not in RUN_SPECIFIC} for line in path.read_text().splitlines()]


@pytest.mark.parametrize("command,method", [("baseline", "sw-1"), ("rerank", "acurank-9")])
def test_three_shards_merge_into_the_unsharded_run(sample, tmp_path, command, method):
    qrels, run = sample / "dl19" / "qrels.txt", sample / "dl19" / "bm25.run"
    common = ["--method", method, "--reranker", "simulated", "--qrels", qrels, "--no-cache", "--quiet"]
    acurank(command, run, *common, "-o", tmp_path / "full.run")
    parts = []
    for i in (1, 2, 3):
        parts.append(tmp_path / f"part{i}.run")
        acurank(command, run, *common, "--shard", f"{i}/3", "-o", parts[-1])
    seen = [line.split()[0] for p in parts for line in p.read_text().splitlines()]
    assert sorted(set(seen)) == sorted({line.split()[0] for line in run.read_text().splitlines()})  # each query once
    merged = acurank("merge", parts[2], parts[0], parts[1], "-o", tmp_path / "merged.run")  # any order of parts
    assert "merged 3 shards: 43 queries" in merged.stderr
    assert (tmp_path / "merged.run").read_bytes() == (tmp_path / "full.run").read_bytes()
    assert _stats(tmp_path / "merged.stats.jsonl") == _stats(tmp_path / "full.stats.jsonl")
    # the meta file beside it: the command every part was made by, so another run's stats are refused against it
    # (it had none: eval took sw-1's stats for acurank's run and printed their calls), and a resume is refused
    meta, full = (json.loads((tmp_path / f"{n}.run.meta.json").read_text()) for n in ("merged", "full"))
    assert meta["command_digest"] == full["command_digest"] and meta["fingerprint"]["inputs"]["queries"] == 43
    assert meta["merged"]["of"] == 3 and meta["provenance"]["reranker"] == full["provenance"]["reranker"]
    other_method = "sw-1" if method != "sw-1" else "sw-2"
    acurank("baseline", run, *[a if a != method else other_method for a in common], "-o", tmp_path / "o.run")
    foreign = acurank("eval", tmp_path / "merged.run", "--qrels", qrels, "--stats", tmp_path / "o.stats.jsonl",
                      check=False)
    assert foreign.returncode == 2 and "was written by another command than the run" in foreign.stderr, foreign.stderr
    assert acurank("eval", tmp_path / "merged.run", "--qrels", qrels, "--stats", tmp_path / "merged.stats.jsonl")
    again = acurank(command, run, *common, "-o", tmp_path / "merged.run", check=False)
    assert again.returncode == 2 and "is the merge of 3 shards (acurank merge)" in again.stderr, again.stderr
    # the merge refuses what is not the whole of one command
    missing = acurank("merge", parts[0], parts[1], "-o", tmp_path / "x.run", check=False)
    assert missing.returncode == 2 and "missing [3]" in missing.stderr
    twice = acurank("merge", parts[0], parts[0], parts[1], parts[2], "-o", tmp_path / "x.run", check=False)
    assert twice.returncode == 2 and "given twice [1]" in twice.stderr
    other = tmp_path / "other.run"
    acurank(command, run, *common, "--shard", "3/3", "--sim-seed", "7", "-o", other)
    mixed = acurank("merge", parts[0], parts[1], other, "-o", tmp_path / "x.run", check=False)
    assert mixed.returncode == 2 and "another command" in mixed.stderr
    cut = parts[1].read_text().splitlines()
    parts[1].write_text("\n".join(line for line in cut if line.split()[0] != cut[0].split()[0]) + "\n")
    unfinished = acurank("merge", *parts, "-o", tmp_path / "x.run", check=False)
    assert unfinished.returncode == 2 and "is unfinished: 1 of its" in unfinished.stderr
    plain = acurank("merge", tmp_path / "full.run", "-o", tmp_path / "x.run", check=False)
    assert plain.returncode == 2 and "does not describe a shard" in plain.stderr
