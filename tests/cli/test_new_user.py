"""What a new user hits first, each case as a user types it: texts of the wrong type refused where every reader and
the PyTerrier transformer take them, stats tied to their run, --qids that judge nothing, a full disk, a read-only
install, device outputs, compressed outputs, the resume message, one rule for method names' case, conflicting
flags, and the provenance a paper needs. Each test fails on the code before these mechanisms existed."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ENV, ROOT, SAMPLE, acurank, documentation, small_run

DL19 = SAMPLE / "dl19"
DL23 = SAMPLE / "dl23"
SIM = ("--reranker", "simulated", "--qrels", str(DL19 / "qrels.txt"), "--no-cache")


def _one_line_error(ran, *words: str, code: int = 2) -> None:
    assert ran.returncode == code, (ran.returncode, ran.stderr)
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in ran.stderr, ran.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


# -- texts: a string, or one error naming file and line (corpus, candidate files) or query and docno (PyTerrier) --

@pytest.mark.parametrize("record, why", [
    ({"_id": "D", "title": "", "text": None}, "text None is not a string"),
    ({"_id": "D", "title": "", "text": {"a": 1}}, "text {'a': 1} is not a string"),
    ({"_id": "D", "title": ""}, "missing field 'text'"),
    ({"_id": "D", "title": {"x": 1}, "text": "ok"}, "title {'x': 1} is not a string"),
    ({"id": "D", "contents": None}, "contents None is not a string"),
    ({"docid": "D", "segment": 5}, "segment 5 is not a string"),
    ({"_id": None, "text": "x"}, "_id None"),
])
def test_a_corpus_record_whose_text_is_not_a_string_is_one_error_naming_file_and_line(tmp_path, record, why):
    run, qids = small_run(SAMPLE, tmp_path, queries=1, depth=3)
    docids = [line.split()[2] for line in run.read_text().splitlines()]
    corpus = tmp_path / "corpus.jsonl"
    good = [{"_id": d, "title": "", "text": f"passage {d}"} for d in docids[:2]]
    bad = {k: (docids[2] if v == "D" else v) for k, v in record.items()}
    corpus.write_text("".join(json.dumps(r) + "\n" for r in [*good, bad]))
    ran = acurank("rerank", run, "--method", "sw-1", "--reranker", "minilm", "--no-cache", "--corpus", corpus,
                  "--topics", DL19 / "topics.tsv", check=False)
    _one_line_error(ran, f"{corpus}:3", why)


def test_a_candidate_file_with_a_null_text_is_refused(tmp_path):
    record = {"qid": "1", "q_text": "q", "bm25_results": [
        {"pid": "a", "bm25_score": 2.0, "text": "fine"}, {"pid": "b", "bm25_score": 1.0, "text": None}]}
    path = tmp_path / "cands.jsonl"
    path.write_text(json.dumps(record) + "\n")
    ran = acurank("rerank", path, "--method", "sw-1", "--reranker", "minilm", "--no-cache", check=False)
    _one_line_error(ran, f"{path}:1", "text None is not a string")


def _frame(pd, texts, docnos=("a", "b", "c"), column="text"):
    return pd.DataFrame({"qid": ["19335"] * 3, "query": ["what is a flea"] * 3, "docno": list(docnos),
                         column: list(texts), "score": [3.0, 2.0, 1.0]})


@pytest.mark.parametrize("bad", [float("nan"), None, 7, ["x"]])
def test_pyterrier_refuses_a_text_that_is_not_a_string_naming_query_and_docno(bad):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyterrier")
    from acurank_cli.errors import InputError
    from acurank_cli.integrations.pyterrier import AcuRankReranker

    reranker = AcuRankReranker("minilm", method="sw-1", cache=None)
    with pytest.raises(InputError, match=r"query 19335, docno b: column 'text' .* is not a string"):
        reranker.transform(_frame(pd, ["flea one", bad, "flea three"]))


@pytest.mark.parametrize("column", ["passage text", "_text", "text-body", "1st"])
def test_pyterrier_reads_a_text_column_of_any_name(column):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyterrier")
    from acurank_cli.integrations.pyterrier import AcuRankReranker

    texts = ["cats sleep", "a flea is a small jumping insect", "weather"]
    frame = _frame(pd, texts, column=column)
    out = AcuRankReranker("minilm", method="sw-1", text_field=column, cache=None).transform(frame)
    same = AcuRankReranker("minilm", method="sw-1", cache=None).transform(_frame(pd, texts))
    assert list(out["docno"]) == list(same["docno"]) and list(out["rank"]) == [0, 1, 2]


def test_pyterrier_names_query_and_docno_of_a_repeated_docno():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyterrier")
    from acurank_cli.errors import InputError
    from acurank_cli.integrations.pyterrier import AcuRankReranker

    with pytest.raises(InputError, match=r"^rows 0 and 2: query 19335 gives docno a twice: docnos must be unique"):
        AcuRankReranker("minilm", method="sw-1", cache=None).transform(_frame(pd, ["x", "y", "z"], ("a", "b", "a")))


def test_the_pyterrier_recipe_keeps_ten_documents_at_cutoff_ten():
    """docs/pyterrier.md's frame, cut at 10 (``bm25 % 10``): ten documents a query, and BM25's nDCG@10 0.5058."""
    pd = pytest.importorskip("pandas")
    pt = pytest.importorskip("pyterrier")
    import re

    block = re.search(r"<!-- pyterrier -->\n```python\n(.*?)```", documentation(), re.S).group(1)
    setup = block[: block.index("bm25 = ")]
    scope: dict = {}
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        exec(setup, scope)  # noqa: S102 - the documented recipe, as written
    finally:
        os.chdir(cwd)
    bm25 = pt.Transformer.from_df(scope["run"])
    cut = (bm25 % 10).transform(scope["topics"])
    assert set(cut.groupby("qid").size()) == {10}
    table = pt.Experiment([bm25 % 10], scope["topics"], scope["qrels"], [pt.measures.nDCG @ 10])
    assert round(float(table["nDCG@10"].iloc[0]), 4) == 0.5058
    assert pd is not None


# -- stats belong to their run ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stats")
    for ds in ("dl19", "dl23"):
        acurank("rerank", SAMPLE / ds / "bm25.run", "--method", "acurank-9", "--reranker", "simulated",
                "--qrels", SAMPLE / ds / "qrels.txt", "--no-cache", "-o", folder / f"{ds}.run")
    acurank("rerank", DL19 / "bm25.run", "--method", "sw-1", *SIM, "-o", folder / "sw.run")
    return folder


def test_eval_refuses_the_stats_of_another_dataset(two_runs):
    ran = acurank("eval", two_runs / "dl23.run", "--qrels", DL23 / "qrels.txt", "--stats",
                  two_runs / "dl19.stats.jsonl", check=False)
    assert ran.returncode == 2 and "that the run" in ran.stderr and "does not have" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr


def test_eval_refuses_the_stats_of_another_command_on_the_same_queries(two_runs):
    ran = acurank("eval", two_runs / "dl19.run", "--qrels", DL19 / "qrels.txt", "--stats",
                  two_runs / "sw.stats.jsonl", check=False)
    assert ran.returncode == 2 and "written by another command" in ran.stderr, ran.stderr


def test_eval_and_report_say_a_stats_file_that_lost_records(two_runs, tmp_path):
    run = tmp_path / "acurank-9.run"
    shutil.copy(two_runs / "dl19.run", run)
    shutil.copy(two_runs / "dl19.run.meta.json", tmp_path / "acurank-9.run.meta.json")
    records = (two_runs / "dl19.stats.jsonl").read_text().splitlines(True)
    (tmp_path / "acurank-9.stats.jsonl").write_text("".join(records[:30]))
    ran = acurank("eval", run, "--qrels", DL19 / "qrels.txt")
    assert "holds the stats of 30 of the 43 queries" in ran.stderr, ran.stderr
    shutil.copy(DL19 / "qrels.txt", tmp_path / "qrels.txt")
    ran = acurank("report", "efficiency", "--runs", tmp_path, "-f", "csv")
    assert "holds the stats of 30 of the 43 queries" in ran.stderr, ran.stderr


@pytest.mark.parametrize("damage", ["deleted", "cut"])
def test_a_resume_reruns_the_finished_queries_whose_stats_are_gone(tmp_path, damage):
    run, qids = small_run(SAMPLE, tmp_path, queries=4)
    full = tmp_path / "full.run"
    acurank("rerank", run, "--method", "acurank-9", *SIM, "-o", full)
    part = tmp_path / "part.run"
    text = full.read_text()
    part.write_text(text[: text.index(f"{qids[3]} Q0")])  # three queries finished
    shutil.copy(tmp_path / "full.run.meta.json", tmp_path / "part.run.meta.json")
    stats = tmp_path / "part.stats.jsonl"
    if damage == "cut":
        stats.write_text((tmp_path / "full.stats.jsonl").read_text().splitlines(True)[0])
    ran = acurank("rerank", run, "--method", "acurank-9", *SIM, "-o", part)
    assert ("3 finished queries" if damage == "deleted" else "2 finished queries") in ran.stderr, ran.stderr
    assert part.read_text() == full.read_text()
    assert [json.loads(line)["qid"] for line in stats.read_text().splitlines()] == qids


def test_eval_refuses_qids_that_name_no_judged_query():
    ran = acurank("eval", DL19 / "bm25.run", "--qrels", DL19 / "qrels.txt", "--qids", "999", check=False)
    _one_line_error(ran, "--qids names no query that the qrels", "999")


# -- a full disk: one line naming the file, exit 74, the finished queries kept -------------------------------------

@pytest.fixture()
def small_disk(tmp_path):
    """A 64 KiB tmpfs (root can mount one); else /dev/full stands in for a disk that is full."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _cli(*args, cwd: Path | None = None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acurank_cli", *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd, timeout=600)


def test_a_full_disk_is_one_line_naming_the_file_and_loses_nothing(small_disk):
    out = small_disk / "r.run"
    ran = _cli("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "-o", out, "--quiet")
    assert ran.returncode == 74 and ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert f"{out}: cannot write: No space left on device (ENOSPC)" in ran.stderr
    finished = int(ran.stderr.split("; ")[1].split()[0])  # "N finished queries are in ..."
    whole = acurank("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "--quiet").stdout
    kept = out.read_text()
    assert finished >= 1 and whole.startswith(kept)  # the finished blocks, then at most a torn one (a resume drops it)
    assert len({line.split()[0] for line in kept.splitlines(True) if line.endswith("\n")}) in (finished, finished + 1)
    resumed = _cli("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "-o", out)  # the resume's rewrite
    assert resumed.returncode == 74 and "Traceback" not in resumed.stderr, resumed.stderr
    evaluated = _cli("eval", DL19 / "bm25.run", "--qrels", DL19 / "qrels.txt", "-q", "-o", small_disk / "e.tsv")
    assert evaluated.returncode == 74 and "e.tsv: cannot write" in evaluated.stderr, evaluated.stderr
    with (small_disk / "s.run").open("w") as fh:
        piped = _cli("rerank", DL19 / "bm25.run", "--method", "sw-1", *SIM, stdout=fh)
    assert piped.returncode == 74 and "(standard output): cannot write" in piped.stderr, piped.stderr
    assert "Traceback" not in evaluated.stderr + piped.stderr


def test_dev_full_is_a_full_disk_too():
    ran = _cli("eval", DL19 / "bm25.run", "--qrels", DL19 / "qrels.txt", "-o", "/dev/full")
    assert ran.returncode == 74 and "/dev/full: cannot write" in ran.stderr and "Traceback" not in ran.stderr


# -- a read-only install: the package folder and HOME not writable --------------------------------------------------

def test_a_read_only_install_reranks_the_same_bytes(tmp_path):
    """The package folder and HOME bind-mounted read-only in a private mount namespace (even root cannot write
    there), no NUMBA_CACHE_DIR: numba finds no cache location and compiles without one."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare for a read-only bind mount")
    home = tmp_path / "home"
    home.mkdir()
    package = ROOT / "acurank_cli"
    script = (f"set -e; mount --bind {package} {package}; mount -o remount,bind,ro {package}; "
              f"mount --bind {home} {home}; mount -o remount,bind,ro {home}; "
              f"exec env -u NUMBA_CACHE_DIR -u XDG_CACHE_HOME HOME={home} \"$@\"")
    args = [sys.executable, "-m", "acurank_cli", "rerank", str(DL19 / "bm25.run"), "--method", "acurank", *SIM,
            "--quiet"]
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("mount namespaces are not allowed here")
    ran = subprocess.run(["unshare", "--mount", "bash", "-c", script, "ro", *args], capture_output=True, text=True,
                         env=ENV, timeout=900)
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr[-2000:]
    assert ran.stdout == acurank("rerank", DL19 / "bm25.run", "--method", "acurank", *SIM, "--quiet").stdout


# -- devices and compressed outputs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["/dev/null", "/dev/stdout"])
def test_a_device_output_is_written_as_stdout_is_with_nothing_beside_it(device):
    before = {(p, p.stat().st_mtime_ns) for p in Path("/dev").glob(f"{Path(device).name}.*")}
    for _ in range(2):  # the second identical command works too: nothing was left to clobber
        ran = _cli("rerank", DL19 / "bm25.run", "--method", "sw-1", *SIM, "--qids", "19335", "-o", device)
        assert ran.returncode == 0, ran.stderr
    assert {(p, p.stat().st_mtime_ns) for p in Path("/dev").glob(f"{Path(device).name}.*")} == before
    if device == "/dev/stdout":
        assert ran.stdout.count("\n") == 100


def test_a_gz_output_is_gzip_and_resumes(tmp_path):
    run, qids = small_run(SAMPLE, tmp_path, queries=4)
    plain, packed = tmp_path / "plain.run", tmp_path / "packed.run.gz"
    acurank("rerank", run, "--method", "acurank-9", *SIM, "-o", plain)
    acurank("rerank", run, "--method", "acurank-9", *SIM, "-o", packed, "--stats", tmp_path / "p.stats.jsonl.gz")
    assert gzip.decompress(packed.read_bytes()).decode() == plain.read_text()
    stats = gzip.decompress((tmp_path / "p.stats.jsonl.gz").read_bytes()).decode().splitlines()
    assert [json.loads(line)["qid"] for line in stats] == qids
    # a crash mid-block: two complete members, then a torn one; the resume keeps the two, finishes the run
    blocks = [plain.read_text()[plain.read_text().index(f"{q} Q0"):] for q in qids]
    first, second = (b[: b.index(f"{qids[i + 1]} Q0")] for i, b in enumerate(blocks[:2]))
    torn = gzip.compress(blocks[2].encode(), mtime=0)
    packed.write_bytes(gzip.compress(first.encode(), mtime=0) + gzip.compress(second.encode(), mtime=0) + torn[:-20])
    (tmp_path / "p.stats.jsonl.gz").write_bytes(gzip.compress("".join(line + "\n" for line in stats[:2]).encode()))
    ran = acurank("rerank", run, "--method", "acurank-9", *SIM, "-o", packed, "--stats", tmp_path / "p.stats.jsonl.gz")
    assert "2 of 4 queries already done" in ran.stderr, ran.stderr
    assert gzip.decompress(packed.read_bytes()).decode() == plain.read_text()
    assert acurank("eval", packed, "--qrels", DL19 / "qrels.txt").stdout.splitlines()[0] == acurank(
        "eval", plain, "--qrels", DL19 / "qrels.txt").stdout.splitlines()[0]


def test_whole_file_outputs_are_gzip_by_suffix(tmp_path):
    out = tmp_path / "e.tsv.gz"
    acurank("eval", DL19 / "bm25.run", "--qrels", DL19 / "qrels.txt", "-o", out)
    assert "ndcg_cut_10" in gzip.decompress(out.read_bytes()).decode()


# -- messages, names, flags ------------------------------------------------------------------------------------------

def test_a_resume_with_other_settings_names_every_setting_and_the_model(tmp_path):
    run, two = DL19 / "bm25.run", "19335,47923"
    out = tmp_path / "r.run"
    acurank("rerank", run, "--method", "acurank", *SIM, "--qids", two, "-o", out)
    ran = acurank("rerank", run, "--method", "acurank", "--reranker", "minilm", "--no-cache", "--eps", "0.001",
                  "--tau", "5", "--qids", two, "-o", out, check=False)
    (line,) = [line for line in ran.stderr.splitlines() if "error" in line]
    assert ran.returncode == 2, ran.stderr
    for said in ("params.eps: 0.01 -> 0.001", "params.tau: 10 -> 5", "reranker.backend: 'simulated' -> 'minilm'"):
        assert said in line, (said, line)
    assert "model model" not in line


def test_the_docs_say_which_commands_take_q():
    def short_flags(*path):
        helped = acurank(*path, "--help").stdout
        return {line.split(",")[0].strip() for line in helped.splitlines() if line.strip().startswith("-q,")}

    assert short_flags("rerank") == {"-q"} and short_flags("baseline") == {"-q"}
    assert short_flags("eval") == {"-q"} and short_flags("retrieve") == {"-q"} and short_flags("index") == {"-q"}
    quiet = {line.strip().split("  ")[0] for c in ("rerank", "retrieve") for line in acurank(c, "--help").stdout.splitlines()
             if "--quiet" in line}
    assert quiet == {"-q, --quiet"}  # one declaration: the same spelling (and help) wherever it is taken
    text = (ROOT / "docs" / "evaluation.md").read_text()
    assert "take `-q` for `--quiet`, as `rerank` and `baseline` do" in text
    assert "elsewhere `-q` is" not in text


@pytest.mark.parametrize("given, tag", [("acurank-h", "acurank-H"), ("AcuRank", "acurank"), ("ACURANK-hh-9", "acurank-HH-9"),
                                        ("SW-1", "sw-1"), ("Acurank-Auto-9", "acurank-auto-9")])
def test_one_rule_for_case_in_method_names(given, tag):
    command = "baseline" if given.lower().startswith("sw") else "rerank"
    ran = acurank(command, DL19 / "bm25.run", "--method", given, *SIM, "--qids", "19335", "--tag", "x")
    canonical = acurank(command, DL19 / "bm25.run", "--method", tag, *SIM, "--qids", "19335", "--tag", "x")
    assert ran.stdout == canonical.stdout
    tagged = acurank(command, DL19 / "bm25.run", "--method", given, *SIM, "--qids", "19335")
    assert tagged.stdout.split("\n")[0].split()[-1] == f"{tag}.simulated"


def test_conflicting_flags_are_refused():
    ran = acurank("rerank", DL19 / "bm25.run", *SIM, "--cache", "x.sqlite", check=False)
    _one_line_error(ran, "--no-cache and --cache x.sqlite contradict each other")
    ran = acurank("rerank", DL19 / "bm25.run", *SIM, "--overwrite", check=False)
    _one_line_error(ran, "--overwrite replaces output files")
    ran = acurank("eval", DL19 / "bm25.run", "--qrels", DL19 / "qrels.txt", "--overwrite", check=False)
    _one_line_error(ran, "--overwrite replaces output files")


def test_the_readme_says_how_to_run_the_installed_command_and_the_tour_writes_under_out():
    readme = (ROOT / "README.md").read_text()
    assert "source .venv/bin/activate" in readme and ".venv/bin/acurank" in readme
    tour = readme[readme.index("## A tour"):readme.index("`rerank` writes a TREC run")]
    written = [w for line in tour.splitlines() for w in line.split() if w.endswith((".run", ".jsonl"))
               and not w.startswith("sample_runs/")]
    assert written and all(w.startswith("out/") for w in written), written


# -- provenance -----------------------------------------------------------------------------------------------------

def test_provenance_records_the_command_time_source_inputs_and_numba(tmp_path):
    out = tmp_path / "p.run"
    acurank("rerank", DL19 / "bm25.run", "--method", "acurank-9", *SIM, "--qids", "19335", "-o", out)
    prov = json.loads((tmp_path / "p.run.meta.json").read_text())["provenance"]
    assert prov["command"].startswith("acurank rerank ") and "--method acurank-9" in prov["command"]
    assert prov["started"][:4].isdigit() and prov["started"].endswith("+00:00")
    assert len(prov["source"]["build"]) == 16 and "numba" in prov["packages"]
    import hashlib

    digest = hashlib.sha256((DL19 / "bm25.run").read_bytes()).hexdigest()
    assert prov["inputs"]["RUN"] == {"path": str(DL19 / "bm25.run"), "sha256": digest}
    assert prov["inputs"]["--qrels"]["sha256"] == hashlib.sha256((DL19 / "qrels.txt").read_bytes()).hexdigest()
    shown = json.loads(acurank("report", "provenance", out, "-f", "json").stdout)
    row = shown[0] if isinstance(shown, list) else next(iter(shown.values()))
    assert row["method"] == "acurank-9" and row["params"]["seed"] == 0 and row["params"]["cap"] == 9


# -- every window size the flags accept: double precision, and mpmath where double cannot rate ------------------------

#: DL19 queries in run order: the first (264014) double precision rates at --window 95; 1121709 (the 7th, where the
#: run used to stop) and 855410 (the 29th) each have a window only mpmath rates, for acurank and ts-1-1 alike;
#: acurank-auto rates every query's first window (95 documents under 9 noise models) by mpmath, so its three are the
#: three it rates fastest (about 2 s each with the library updater: measured)
WINDOW_95_QUERIES = "264014,1121709,855410"


@pytest.mark.parametrize("command, method, qids", [("rerank", "acurank", WINDOW_95_QUERIES),
                                                   ("rerank", "acurank-auto", "130510,1110199,1129237"),
                                                   ("baseline", "ts-1-1", WINDOW_95_QUERIES)])
def test_a_window_of_95_rates_every_query_and_both_updaters_agree(command, method, qids, monkeypatch):
    """DL19 with --window 95 stopped on its 7th query (FloatingPointError from the TrueSkill update); now the window
    double precision cannot rate is rated by the library's mpmath backend, by either updater alike. Three queries,
    each in its run order: one that double precision rates throughout, then two that reach the mpmath update (counted
    here, so the test fails if they stop reaching it), and every query is in both runs, byte for byte the same."""
    from acurank_cli.method import trueskill

    precise = []
    update = trueskill.precise_update
    monkeypatch.setattr(trueskill, "precise_update", lambda *a, **kw: (precise.append(len(a[2])), update(*a, **kw)))
    runs = []
    for updater in ("fast", "library"):
        precise.clear()
        runs.append(acurank(command, DL19 / "bm25.run", "--method", method, "--window", "95", "--updater", updater,
                            *SIM, "--qids", qids, "--quiet").stdout)
        assert len(precise) >= 2 and set(precise) == {95}, (updater, precise)
    assert runs[0] == runs[1]
    assert list(dict.fromkeys(line.split()[0] for line in runs[0].splitlines())) == qids.split(",")


def test_the_precise_update_is_the_same_rating_where_double_precision_rates():
    import numpy as np

    from acurank_cli.method.trueskill import library_update, precise_update

    rng = np.random.default_rng(0)
    mu = rng.uniform(5, 30, 20)
    sigma = mu / 3
    order = list(rng.permutation(20))
    a, b = (mu.copy(), sigma.copy()), (mu.copy(), sigma.copy())
    library_update(*a, order)
    precise_update(*b, order)
    # the default backend's erfc is a Chebyshev fit good to about 1.2e-7 (Numerical Recipes), mpmath's is exact, and
    # the sweeps stop at a message change of 1e-4: the two agree to about 1e-6 of a rating
    assert np.allclose(a[0], b[0], rtol=1e-5) and np.allclose(a[1], b[1], rtol=1e-5)
    assert not np.array_equal(a[0], mu)  # it rated


def test_a_whole_file_output_to_dev_stdout_on_a_pipe_is_written():
    ran = _cli("eval", DL19 / "bm25.run", "--qrels", DL19 / "qrels.txt", "-o", "/dev/stdout")  # stdout is a pipe here
    assert ran.returncode == 0 and ran.stdout.startswith("ndcg_cut_10\tall\t0.5058"), ran.stderr


# -- what a new user hit (3) ----------------------------------------------------------------------------------------


def _gate(tmp_path, text: str) -> subprocess.CompletedProcess:
    gates = tmp_path / "expected.tsv"
    gates.write_text(text)
    return subprocess.run(["bash", str(ROOT / "scripts" / "ci_gate.sh"), str(gates)], capture_output=True, text=True,
                          env={**ENV, "PY": sys.executable}, timeout=600)


def test_the_gate_script_reads_a_last_line_without_newline_and_fails_with_no_gate(tmp_path):
    """A gate on the last line without its newline is checked (an impossible figure fails it); a file with no gate
    fails; a malformed line is one error naming FILE:LINE; the gates checked are counted."""
    last = _gate(tmp_path, "# comment\ndl19\tsw-1\t0.99")  # no final newline, a figure sw-1 cannot reach
    assert last.returncode == 1 and "gate failed" in last.stderr, last.stdout + last.stderr
    for empty in ("", "# only a comment\n", "\n\n"):
        none = _gate(tmp_path, empty)
        assert none.returncode == 1 and "no gate" in none.stderr and "nothing was checked" in none.stderr
    bad = _gate(tmp_path, "dl19\tsw-1\t0.5\ndl19\tsw-1\n")
    assert bad.returncode == 2 and f"{tmp_path / 'expected.tsv'}:2:" in bad.stderr
    held = _gate(tmp_path, "dl19\tsw-1\t0.5")
    assert held.returncode == 0 and "1 gates held" in held.stdout, held.stderr


def test_a_method_plug_in_that_fails_to_import_is_one_line_as_a_backends_is():
    """ACURANK_METHODS naming a module that cannot be imported: every command still starts (eval runs), and a
    command that resolves a method says so in one line, exit 2, exactly as ACURANK_BACKENDS does."""
    for variable in ("ACURANK_METHODS", "ACURANK_BACKENDS"):
        env = {**ENV, variable: "no_such_module"}
        ran = subprocess.run([sys.executable, "-m", "acurank_cli", "eval", str(SAMPLE / "dl19" / "bm25.run"), "--qrels",
                              str(SAMPLE / "dl19" / "qrels.txt")], capture_output=True, text=True, env=env, timeout=300)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, (variable, ran.stderr)
        ran = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", str(SAMPLE / "dl19" / "bm25.run"),
                              "--reranker", "simulated", "--qrels", str(SAMPLE / "dl19" / "qrels.txt"), "--no-cache",
                              "--quiet"], capture_output=True, text=True, env=env, timeout=300)
        _one_line_error(ran, "no_such_module")


@pytest.mark.parametrize("args,message", [
    (("rerank", "--eps", "1e-400"), "--eps 1e-400: must be a number in (0, 0.5)"),  # as typed, not 0.0
    (("rerank", "--eps=2e-0"), "--eps 2e-0: must be a number in (0, 0.5)"),
    (("eval", "-l", "-1"), "--rel-level -1: must be an integer >= 1"),
    (("eval", "--rel-level", "0"), "--rel-level 0: must be an integer >= 1"),
])
def test_a_value_out_of_its_domain_is_quoted_as_typed(args, message):
    command, *flags = args
    extra = ("--reranker", "simulated") if command == "rerank" else ()
    ran = acurank(command, SAMPLE / "dl19" / "bm25.run", "--qrels", SAMPLE / "dl19" / "qrels.txt", *extra, *flags,
                  check=False)
    assert ran.returncode == 2 and ran.stderr.strip() == f"acurank: error: {message}", ran.stderr
