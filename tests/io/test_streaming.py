"""A rerank reads its run once, query by query, and holds the current batch, not the input: the driver pulls a
query only when the batch has room, a shard keeps only its own queries, a run not grouped by query is joined
(with a note) rather than split, and a bad line anywhere is still refused before the first model call."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the helpers in tests/
from conftest import SAMPLE, acurank, small_run  # noqa: E402

from acurank_cli.io.runs import run_blocks  # noqa: E402
from acurank_cli.method.registry import build_strategy  # noqa: E402
from acurank_cli.rerankers.backends.simulated import SimulatedReranker  # noqa: E402
from acurank_cli.run.driver import Driver  # noqa: E402
from acurank_cli.run.inputs import InputSpec  # noqa: E402
from acurank_cli.io.shards import Shard  # noqa: E402

QRELS = SAMPLE / "dl19" / "qrels.txt"
SIM = ("--reranker", "simulated", "--qrels", QRELS, "--no-cache", "--quiet")


def test_the_driver_pulls_a_query_only_when_the_batch_has_room():
    inputs = InputSpec(run=str(SAMPLE / "dl19" / "bm25.run"), depth=100).load(False)
    pulled = []

    def tasks():
        for task in inputs.tasks:
            pulled.append(task.qid)
            yield task

    from acurank_cli.io.collection_files import read_qrels

    reranker = SimulatedReranker(read_qrels(QRELS), noise=1.0)
    held = {}
    for batch in (1, 4):
        pulled.clear()
        outcomes = Driver(build_strategy("acurank-9"), reranker, None, batch).run(tasks())
        held[batch] = [len(pulled) - i for i, _ in enumerate(outcomes)]  # read but not yet handed back, per yield
        assert len(pulled) == len(inputs.tasks) == 43
    assert set(held[1]) <= {1, 2}  # one query in flight (and the next, pulled as the batch's room opened)
    # four in flight, and those finished before an earlier one (handed back in input order): never the input
    assert 4 <= held[4][0] < 43 and max(held[4]) < 43 // 2, held[4]


def test_run_blocks_keep_only_the_wanted_queries_and_flag_a_query_seen_again():
    lines = ["1 Q0 a 1 3 t", "1 Q0 b 2 2 t", "2 Q0 a 1 3 t", "1 Q0 c 3 1 t", "3 Q0 z 1 1 t"]
    blocks = list(run_blocks(enumerate(lines, 1), "x.run", keep=lambda q: q != "3"))
    assert [(b.qid, b.docids, b.scores, b.line, b.again) for b in blocks] == [
        ("1", ("a", "b"), (3.0, 2.0), 1, False), ("2", ("a",), (3.0,), 3, False), ("1", ("c",), (1.0,), 4, True),
        ("3", (), (), 5, False)]


def test_a_shard_holds_only_its_queries(tmp_path):
    run = SAMPLE / "dl19" / "bm25.run"
    whole = InputSpec(run=str(run), depth=100).load(False)
    part = InputSpec(run=str(run), depth=100, shard=Shard(1, 3)).load(False)
    assert part.every_query == whole.every_query and len(whole.every_query) == 43
    assert [t.qid for t in part.tasks] == [q for q in whole.every_query if Shard(1, 3).holds(q)]
    assert 0 < len(part.tasks) < 43


def test_a_run_not_grouped_by_query_is_joined_not_split(tmp_path):
    run, qids = small_run(SAMPLE, tmp_path, queries=2, depth=20)
    lines = run.read_text().splitlines(True)
    first = [line for line in lines if line.startswith(qids[0] + " ")]
    second = [line for line in lines if line.startswith(qids[1] + " ")]
    mixed = tmp_path / "mixed.run"
    mixed.write_text("".join(first[:7] + second + first[7:]))  # query 1's lines split around query 2's
    grouped = acurank("rerank", run, *SIM, "--method", "acurank", "-o", tmp_path / "g.run")
    ran = acurank("rerank", mixed, *SIM, "--method", "acurank", "-o", tmp_path / "m.run")
    assert (tmp_path / "m.run").read_text() == (tmp_path / "g.run").read_text()
    assert grouped.stderr.count("not grouped") == 0
    assert f"warning: {mixed} is not grouped by query (query {qids[0]} again at line 28)" in ran.stderr, ran.stderr
    dup = tmp_path / "dup.run"
    dup.write_text("".join(first[:7] + second + first[6:]))  # query 1's 7th document in both of its blocks
    bad = acurank("rerank", dup, *SIM, "-o", tmp_path / "d.run", check=False)
    assert bad.returncode == 2 and f"dup.run:28: docid {first[6].split()[2]} repeated" in bad.stderr, bad.stderr


def test_a_bad_last_line_is_refused_before_any_call(tmp_path):
    run = tmp_path / "bad.run"
    run.write_text((SAMPLE / "dl19" / "bm25.run").read_text() + "264014 Q0 x 101 nan-ish bm25\n")
    ran = acurank("rerank", run, *SIM, "-o", tmp_path / "out.run", check=False)
    assert ran.returncode == 2 and "bad.run:4301: score 'nan-ish' is not a number" in ran.stderr, ran.stderr
    assert not (tmp_path / "out.run").exists()


def test_merge_streams_parts_and_still_orders_a_part_written_out_of_order(tmp_path):
    run, _ = small_run(SAMPLE, tmp_path, queries=6, depth=20)
    parts = []
    for i in (1, 2):
        parts.append(tmp_path / f"p{i}.run")
        acurank("baseline", run, *SIM, "--method", "sw-1", "--shard", f"{i}/2", "-o", parts[-1])
    acurank("merge", *parts, "-o", tmp_path / "merged.run")
    acurank("baseline", run, *SIM, "--method", "sw-1", "-o", tmp_path / "whole.run")
    assert (tmp_path / "merged.run").read_text() == (tmp_path / "whole.run").read_text()
    lines = parts[0].read_text().splitlines(True)
    qids = list(dict.fromkeys(line.split()[0] for line in lines))
    assert len(qids) >= 2
    parts[0].write_text("".join(line for q in reversed(qids) for line in lines if line.split()[0] == q))
    acurank("merge", *parts, "-o", tmp_path / "merged2.run")
    assert (tmp_path / "merged2.run").read_text() == (tmp_path / "whole.run").read_text()
