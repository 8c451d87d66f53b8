"""eval and report read each run's meta file: unfinished runs, foreign qrels, oracle runs beside model runs."""

from __future__ import annotations

import shutil

from conftest import acurank, small_run


def _runs(sample, tmp_path):
    """dl19/sw-1.run (finished, simulated) and dl19/acurank.run (cut to 1 of its 3 queries, as a kill leaves it)."""
    run, qids = small_run(sample, tmp_path, queries=3, depth=20)
    qrels = sample / "dl19" / "qrels.txt"
    folder = tmp_path / "runs" / "dl19"
    folder.mkdir(parents=True)
    shutil.copy(qrels, folder / "qrels.txt")
    for method in ("sw-1", "acurank"):
        acurank("rerank", run, "--method", method, "--reranker", "simulated", "--qrels", qrels,
                "-o", folder / f"{method}.run")
    cut = folder / "acurank.run"
    cut.write_text("".join(l + "\n" for l in cut.read_text().splitlines() if l.split()[0] == qids[0]))
    return folder, qrels, qids


def test_report_refuses_an_unfinished_run_and_eval_warns(sample, tmp_path):
    folder, qrels, _ = _runs(sample, tmp_path)
    proc = acurank("report", "table", "--runs", folder.parent, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (f"acurank: error: dl19/acurank: {folder / 'acurank.run'} is unfinished (1 of 3 "
                                   "queries); finish it (rerun its rerank command) or leave it out, so that every "
                                   "column covers the same queries")
    ok = acurank("report", "table", "--runs", folder.parent, "--method", "sw-1", check=False)
    assert ok.returncode == 2  # rows may be restricted, but the unfinished run is still in the collection
    (folder / "acurank.run").unlink()
    assert acurank("report", "table", "--runs", folder.parent).returncode == 0
    proc = acurank("eval", folder / "sw-1.run", "--qrels", qrels)
    assert "unfinished" not in proc.stderr  # finished; its coverage of the qrels is said
    assert "3 of the 43 qrels queries are in the run" in proc.stderr


def test_eval_warns_about_an_unfinished_run(sample, tmp_path):
    folder, qrels, _ = _runs(sample, tmp_path)
    proc = acurank("eval", folder / "acurank.run", "--qrels", qrels)
    assert f"acurank: warning: {folder / 'acurank.run'} is unfinished (1 of 3 queries)" in proc.stderr


def test_eval_with_foreign_qrels_is_an_error(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=3, depth=20)
    proc = acurank("eval", run, "--qrels", sample / "dl23" / "qrels.txt", check=False)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith(f"acurank: error: {run}: shares no query with the qrels ") and "qrels of another dataset?" in line
    assert len(proc.stderr.strip().splitlines()) == 1


def test_eval_warns_when_few_queries_are_judged(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=3, depth=20)
    qrels = tmp_path / "q.txt"
    qrels.write_text("".join(l + "\n" for l in (sample / "dl19" / "qrels.txt").read_text().splitlines()
                             if l.split()[0] == qids[0]))
    proc = acurank("eval", run, "--qrels", qrels)
    assert f"acurank: warning: {run}: only 1 of its 3 queries are judged in {qrels}" in proc.stderr


def test_simulated_runs_say_so_in_tag_and_report_warns_when_mixed(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=2, depth=20)
    folder = tmp_path / "mix" / "dl19"
    folder.mkdir(parents=True)
    shutil.copy(sample / "dl19" / "qrels.txt", folder / "qrels.txt")
    acurank("rerank", run, "--method", "sw-1", "--reranker", "simulated", "--qrels", folder / "qrels.txt",
            "-o", folder / "sw-1.run")
    assert {l.split()[5] for l in (folder / "sw-1.run").read_text().splitlines()} == {"sw-1.simulated"}
    proc = acurank("rerank", run, "--method", "sw-1", "-o", folder / "minilm.run",  # the default: the embedded model
                   "--topics", sample / "dl19" / "topics.tsv", "--corpus", sample / "dl19" / "passages.jsonl.gz")
    assert "with reranker minilm" in proc.stderr
    assert {l.split()[5] for l in (folder / "minilm.run").read_text().splitlines()} == {"sw-1"}
    proc = acurank("report", "table", "--runs", folder.parent)
    assert "acurank: warning: this report mixes runs of the simulated reranker (a qrels oracle: dl19/sw-1) with " \
           "model runs (dl19/minilm)" in proc.stderr
