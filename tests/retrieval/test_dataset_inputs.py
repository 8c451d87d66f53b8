"""rerank inputs from an ir_datasets dataset (local files registered offline, IR_DATASETS_HOME in tmp)."""

from __future__ import annotations

import pytest

from acurank_cli.run.driver import Driver
from acurank_cli.run.inputs import InputSpec
from acurank_cli.rerankers.backends.simulated import SimulatedReranker
from acurank_cli.method.registry import build_strategy

pytest.importorskip("ir_datasets")


def test_rerank_inputs_from_irds(tmp_path, monkeypatch, sample):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    from acurank_cli.retrieval.datasets import register_local

    run_lines = (sample / "dl19" / "bm25.run").read_text().splitlines()
    qid = run_lines[0].split()[0]
    run = tmp_path / "bm25.run"
    run.write_text("\n".join(l for l in run_lines if l.split()[0] == qid and int(l.split()[3]) <= 30) + "\n")
    topics = {l.split("\t")[0]: l for l in (sample / "dl19" / "topics.tsv").read_text().splitlines()}
    (tmp_path / "q.tsv").write_text(topics[qid] + "\n")
    qrels = [l for l in (sample / "dl19" / "qrels.txt").read_text().splitlines() if l.split()[0] == qid]
    (tmp_path / "qrels.txt").write_text("\n".join(qrels) + "\n")
    name = register_local("acurank-test-dl19-one", sample / "dl19" / "passages.jsonl.gz", tmp_path / "q.tsv",
                          tmp_path / "qrels.txt")
    inputs = InputSpec(run=str(run), depth=100, dataset=name).load(True)
    (task,) = inputs.tasks
    assert task.qid == qid and task.query == topics[qid].split("\t")[1] and task.n == 30
    assert all(c.docid in inputs.docs and inputs.docs[c.docid].text for c in task.candidates)
    assert inputs.qrels[qid] and any(n.startswith("using topics, qrels and texts") for n in inputs.notes)
    (out,) = Driver(build_strategy("acurank"), SimulatedReranker(inputs.qrels)).run(inputs.tasks)
    assert out.tally.calls >= 2 and len(out.ranking) == 30
