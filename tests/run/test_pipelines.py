"""The fifteen cases of "shell pipelines that never lose or misread data", each as a user types it in bash: a real
``bash -c`` with ``acurank`` a shell function running ``python -m acurank_cli`` (so process substitution, FIFOs,
``-`` and ``/dev/stdin`` are the shell's own), exit codes and stderr as the user sees them, inputs checked by sha256.

Each test failed on the code before these fixes (2fbf8a2: run this file with PYTHONPATH pointing at a checkout of
it); the numbers are the issue's items.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the helpers in tests/
from conftest import ENV, ROOT, SAMPLE, documentation, small_run  # noqa: E402

S = SAMPLE / "dl19"
PRELUDE = f'acurank() {{ "{sys.executable}" -m acurank_cli "$@"; }}\nS={S}\n'


def bash(script: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``script`` run by bash in ``cwd`` (``acurank`` and ``$S``, the DL19 sample folder, defined)."""
    return subprocess.run(["bash", "-c", PRELUDE + script], cwd=cwd, capture_output=True, text=True,
                          env={**ENV, "COLUMNS": "200"}, timeout=timeout)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def two(tmp_path: Path) -> Path:
    """two.run: the first two DL19 queries, top 20 (in tmp_path, which is also the working folder), with a copy of
    the qrels and topics."""
    run, _ = small_run(SAMPLE, tmp_path, queries=2, depth=20)
    run.rename(tmp_path / "two.run")
    for name in ("qrels.txt", "topics.tsv", "passages.jsonl.gz"):
        shutil.copy(S / name, tmp_path / name)
    return tmp_path / "two.run"


SIM = "--reranker simulated --qrels qrels.txt --no-cache --quiet"


# 1-3: data destroyed ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("writer, victim", [("--stats", "qrels.txt"), ("--trace", "topics.tsv"),
                                            ("--stats", "two.run")])
def test_1_a_writer_aimed_at_an_input_is_refused(two: Path, writer: str, victim: str):
    before = sha(two.parent / victim)
    ran = bash(f"acurank rerank two.run {SIM} -o out.run {writer} {victim}", two.parent)
    assert ran.returncode == 2, ran.stderr
    assert writer in ran.stderr and victim in ran.stderr and len(ran.stderr.strip().splitlines()) == 1
    assert sha(two.parent / victim) == before and not (two.parent / "out.run").exists()


def test_2_two_writers_into_one_file_are_refused(two: Path):
    ran = bash(f"acurank rerank two.run {SIM} -o same.run --stats same.run", two.parent)
    assert ran.returncode == 2 and "--output" in ran.stderr and "--stats" in ran.stderr, ran.stderr
    assert not (two.parent / "same.run").exists()


def test_3_merge_refuses_an_existing_unrelated_file(two: Path):
    folder = two.parent
    ran = bash(f"for i in 1 2; do acurank baseline two.run {SIM} --method sw-1 --shard $i/2 -o q$i.run; done\n"
               "echo 'my notes' > notes.txt\nacurank merge q1.run q2.run -o notes.txt", folder)
    assert ran.returncode == 2 and "notes.txt" in ran.stderr and "--overwrite" in ran.stderr, ran.stderr
    assert (folder / "notes.txt").read_text() == "my notes\n"
    assert bash("acurank merge q1.run q2.run -o notes.txt --overwrite", folder).returncode == 0
    assert len((folder / "notes.txt").read_text().splitlines()) == 40


# 4-5: data misread -----------------------------------------------------------------------------------------------

def test_4_eval_reads_the_same_bytes_through_every_way_in(tmp_path: Path):
    """<(cat f), <(gzip -c f), a FIFO, - and /dev/stdin print the file's own figures."""
    ways = {"file": "acurank eval $S/bm25.run --qrels $S/qrels.txt",
            "<(cat)": "acurank eval <(cat $S/bm25.run) --qrels $S/qrels.txt",
            "<(gzip)": "acurank eval <(gzip -c $S/bm25.run) --qrels $S/qrels.txt",
            "fifo": "mkfifo ff; cat $S/bm25.run > ff & acurank eval ff --qrels $S/qrels.txt; rm ff",
            "-": "cat $S/bm25.run | acurank eval - --qrels $S/qrels.txt",
            "/dev/stdin": "acurank eval /dev/stdin --qrels $S/qrels.txt < $S/bm25.run",
            "gzip -": "gzip -c $S/bm25.run | acurank eval - --qrels <(cat $S/qrels.txt)"}
    shown = {}
    for name, line in ways.items():
        ran = bash(line, tmp_path, timeout=60)
        assert ran.returncode == 0, (name, ran.stderr)
        shown[name] = ran.stdout
    assert shown["file"] == "ndcg_cut_10\tall\t0.5058\n"  # nDCG@10 of the DL19 BM25 run (PROVENANCE.md: 0.5058)
    assert all(v == shown["file"] for v in shown.values()), shown


def test_4_rerank_through_process_substitution_writes_the_file_s_queries(two: Path):
    ran = bash(f"acurank rerank <(cat two.run) {SIM} -o piped.run && acurank rerank two.run {SIM} -o plain.run",
               two.parent)
    assert ran.returncode == 0, ran.stderr
    piped, plain = (two.parent / "piped.run").read_text(), (two.parent / "plain.run").read_text()
    assert piped == plain and {line.split()[0] for line in piped.splitlines()} == {"264014", "104861"}


def test_5_a_fifo_as_the_run_does_not_hang(two: Path):
    ran = bash(f"mkfifo ff; cat two.run > ff & acurank rerank ff {SIM} -o fifo.run; rm ff\n"
               f"acurank rerank two.run {SIM} -o plain.run", two.parent, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert (two.parent / "fifo.run").read_text() == (two.parent / "plain.run").read_text()


# 6-10: written wrong ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tag", ['"my tag"', "$'a\\nb'", '""'])
def test_6_a_tag_that_is_not_one_trec_field_is_refused(two: Path, tag: str):
    ran = bash(f"acurank rerank two.run {SIM} -o t.run --tag {tag}", two.parent)
    assert ran.returncode == 2 and "--tag" in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert not (two.parent / "t.run").exists()


def test_7_an_empty_qids_value_is_refused(two: Path):
    ran = bash(f'QIDS=""\nacurank rerank two.run {SIM} -o q.run --qids "$QIDS"', two.parent)
    assert ran.returncode == 2 and "--qids" in ran.stderr and "empty" in ran.stderr, ran.stderr
    assert not (two.parent / "q.run").exists()


def test_8_user_text_is_printed_as_text(tmp_path: Path):
    ran = bash("head -99 $S/bm25.run > l100.run; echo 'bad line' >> l100.run\n"
               "acurank eval l100.run --qrels $S/qrels.txt -f terminal\n"
               "head -2 $S/bm25.run | sed '2s/[^ ]*/:fire:/3' > fire.run; sed -n 2p fire.run >> fire.run\n"
               "acurank eval fire.run --qrels $S/qrels.txt -f terminal", tmp_path)
    assert "l100.run:100: expected 6 columns" in ran.stderr, ran.stderr
    assert "docid :fire: repeated" in ran.stderr
    assert not any(ord(c) > 0x2000 for c in ran.stderr), ran.stderr  # no emoji made from the text


def test_9_sharding_a_method_that_pools_across_queries_is_refused(two: Path):
    ran = bash(f"acurank rerank two.run {SIM} --method acurank-auto-9 --shard 1/2 -o s1.run", two.parent)
    assert ran.returncode == 2 and "--shard" in ran.stderr and "--beta-pool query" in ran.stderr, ran.stderr
    ok = bash(f"for i in 1 2; do acurank rerank two.run {SIM} --method acurank-auto-9 --beta-pool query "
              f"--shard $i/2 -o s$i.run; done\nacurank merge s1.run s2.run -o merged.run\n"
              f"acurank rerank two.run {SIM} --method acurank-auto-9 --beta-pool query -o whole.run", two.parent)
    assert ok.returncode == 0, ok.stderr
    assert (two.parent / "merged.run").read_text() == (two.parent / "whole.run").read_text()


def test_10_eval_qids_counts_only_the_selected_queries(tmp_path: Path):
    """A run of 19 finished queries (of 43, as a kill leaves it) evaluated on 10 of them: mean calls over those
    10, and "unfinished (19 of 43)", the file's own count."""
    ran = bash("acurank rerank $S/bm25.run --reranker simulated --qrels $S/qrels.txt --no-cache --quiet "
               "--method acurank -o full.run", tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stderr
    lines = (tmp_path / "full.run").read_text().splitlines(True)
    qids = list(dict.fromkeys(line.split()[0] for line in lines))
    (tmp_path / "part.run").write_text("".join(line for line in lines if line.split()[0] in qids[:19]))
    shutil.copy(tmp_path / "full.run.meta.json", tmp_path / "part.run.meta.json")
    stats = (tmp_path / "full.stats.jsonl").read_text().splitlines(True)[:19]
    (tmp_path / "part.stats.jsonl").write_text("".join(stats))
    calls = {json.loads(s)["qid"]: json.loads(s)["calls"] for s in stats}
    ran = bash(f"acurank eval part.run --qrels $S/qrels.txt --qids {','.join(qids[:10])} -m nDCG@10 -f tsv",
               tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "unfinished (19 of 43 queries)" in ran.stderr, ran.stderr
    shown = float(ran.stdout.splitlines()[-1].split("\t")[-1])
    assert ran.stdout.splitlines()[-1].startswith("mean_calls\t")
    assert shown == pytest.approx(sum(calls[q] for q in qids[:10]) / 10, abs=0.005), (ran.stdout, calls)


# 11-14: confusing ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["acurank", "acurank report"])
def test_11_no_arguments_print_usage(tmp_path: Path, line: str):
    ran = bash(line, tmp_path)
    assert ran.returncode == 2 and "Usage:" in ran.stderr and ran.stdout == "", (ran.returncode, ran.stderr)


def test_12_eval_speaks_as_the_ecosystem_does(tmp_path: Path):
    irds = bash("acurank eval $S/bm25.run --qrels irds:msmarco-passage/trec-dl-2019", tmp_path, timeout=120)
    assert irds.returncode == 2 and "no such file" not in irds.stderr and "ir_datasets" in irds.stderr, irds.stderr
    never = bash("acurank eval $S/bm25.run --qrels $S/qrels.txt --min nDCG@10=1.5", tmp_path)
    assert never.returncode == 2 and "could never pass" in never.stderr, never.stderr
    # machine formats print trec_eval's names (what trec_eval and ir_measures' trec output print), as the README says
    names = bash("acurank eval $S/bm25.run --qrels $S/qrels.txt -m recall.100 -m P.10 -f tsv", tmp_path)
    assert [row.split("\t")[0] for row in names.stdout.splitlines()] == ["recall_100", "P_10"], names.stdout
    assert "`recall.100` -> `recall_100`" in documentation()
    # one gate line per run, naming the run and the gate by its canonical name
    gates = bash("acurank eval $S/bm25.run --qrels $S/qrels.txt --min nDCG@10=0.4 --min ndcg_cut_10=0.3",
                 tmp_path)
    assert gates.returncode == 0, gates.stderr
    held = [line for line in gates.stderr.splitlines() if "gates held" in line]
    assert len(held) == 1 and "bm25.run" in held[0] and "ndcg_cut_10" not in held[0] and "nDCG@10" in held[0], held
    # a base run covering fewer queries than the gated run is refused (its missing queries would score 0)
    base = bash("head -1000 $S/bm25.run > base.run\n"
                "acurank eval $S/bm25.run --qrels $S/qrels.txt --against base.run", tmp_path)
    assert base.returncode == 2 and "--against base.run lacks" in base.stderr, base.stderr


def test_13_efficiency_says_what_was_cached_and_options_are_named(two: Path):
    folder = two.parent
    cached = "--reranker minilm --cache c.sqlite --quiet --method sw-1"  # a real model's calls, cached
    ran = bash(f"acurank baseline two.run {cached} -o a.run\nacurank baseline two.run {cached} -o b.run\n"
               "acurank report efficiency b.run --qrels qrels.txt -f csv", folder, timeout=300)
    assert ran.returncode == 0, ran.stderr
    header, row = ran.stdout.splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(",")))
    assert float(cells["cached"]) == float(cells["calls"]) > 0, ran.stdout  # the second run's calls: all cached
    eps = bash(f"acurank baseline two.run {SIM} --method sw-1 --eps 0.1 -o e.run", folder)
    assert eps.returncode == 2 and "method 'sw-1' does not use --eps" in eps.stderr, eps.stderr
    one = bash(f"head -1 two.run > one.run\nacurank rerank one.run {SIM} -o one-out.run", folder)
    assert one.returncode == 0, one.stderr
    record = json.loads((folder / "one-out.stats.jsonl").read_text())
    assert record["calls"] == 0 and record["iterations"] == [], record  # no window of one document is recorded


def test_14_api_takes_documents_in_score_order_and_explains_p_topk(tmp_path: Path):
    script = tmp_path / "api.py"
    script.write_text(
        "from acurank_cli.api import Reranker, prepare\n"
        "docs = [{'id': 'low', 'text': 'a', 'score': 1.0}, {'id': 'high', 'text': 'b', 'score': 3.0},"
        " {'id': 'mid', 'text': 'c', 'score': 2.0}]\n"
        "print([c.docid for c in prepare('q', docs).task.candidates])\n"
        "with Reranker('minilm', method='acurank') as rr:\n"
        "    out = rr.rerank('what is a', docs)\n"
        "print(sorted(d.first_stage_rank for d in out.docs if d.id == 'high'))\n"
        "print(out.note)\n"
        "try:\n"
        "    prepare('q', [{'id': 'a b', 'text': 'x'}])\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n")
    ran = bash(f'"{sys.executable}" api.py', tmp_path, timeout=180)
    assert ran.returncode == 0, ran.stderr
    order, rank, note, bad = ran.stdout.splitlines()[-4:]
    assert order == "['high', 'mid', 'low']" and rank == "[1]"
    assert "every p_topk is 1.0" in note
    assert bad.startswith("InputError") and "a b" in bad


# 15: the README's timing of make demo states what it depends on --------------------------------------------------

def test_15_readme_states_what_make_demo_time_depends_on():
    readme = (ROOT / "README.md").read_text()
    assert "about 1.5 minutes on 2 CPU cores" not in readme
    assert "make demo" in readme and "depends on" in readme[readme.index("make demo"):][:2000]

