"""Readers, validation errors (file:line), candidate-file formats, writers."""

from __future__ import annotations

import math

import gzip
import io
import json

import pytest

from acurank_cli.errors import InputError
from acurank_cli.io.candidates import read_candidates
from acurank_cli.io.collection_files import read_corpus, read_qrels, read_topics
from acurank_cli.io.runs import read_run
from acurank_cli.io.writers import run_lines
from acurank_cli.records import strictly_decreasing
from acurank_cli.records import Ranked


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_run_orders_by_score_then_docid_desc_and_depth(tmp_path):
    p = write(tmp_path, "r.run", "1 Q0 a 1 2.0 t\n1 Q0 b 2 3.0 t\n1 Q0 c 3 2.0 t\n2 Q0 x 1 1 t\n")
    runs = read_run(p, depth=2)
    assert [c.docid for c in runs["1"]] == ["b", "c"]
    assert list(runs) == ["1", "2"]


def test_run_gz_and_stream(tmp_path):
    p = tmp_path / "r.run.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("7 Q0 d 1 1.5 t\n")
    assert read_run(p)["7"][0].score == 1.5
    assert read_run(io.StringIO("7 Q0 d 1 1.5 t\n"))["7"][0].docid == "d"


@pytest.mark.parametrize(
    "text,line,fragment",
    [
        ("1 Q0 a 1 2.0 t\n1 Q0 b 2 x t\n", 2, "not a number"),
        ("1 Q0 a 1 2.0 t\n\n1 Q0 b 2\n", 3, "expected 6 columns"),
        ("1 Q0 a 1 2.0 t\n1 Q0 a 2 1.0 t\n", 2, "repeated"),
    ],
)
def test_run_errors_name_file_and_line(tmp_path, text, line, fragment):
    p = write(tmp_path, "bad.run", text)
    with pytest.raises(InputError) as exc:
        read_run(p)
    assert str(exc.value).startswith(f"{p}:{line}: ")
    assert fragment in str(exc.value)
    assert "\n" not in str(exc.value)


def test_topics_qrels_corpus(tmp_path):
    assert read_topics(write(tmp_path, "t.tsv", "1\thello world\n")) == {"1": "hello world"}
    with pytest.raises(InputError, match=r"t2.tsv:1: expected"):
        read_topics(write(tmp_path, "t2.tsv", "1 no tab\n"))
    assert read_qrels(write(tmp_path, "q.txt", "1 0 a 2\n1 0 b 0\n")) == {"1": {"a": 2, "b": 0}}
    with pytest.raises(InputError, match=r"q2.txt:1: grade"):
        read_qrels(write(tmp_path, "q2.txt", "1 0 a x\n"))
    corpus = write(
        tmp_path, "c.jsonl",
        json.dumps({"_id": "a", "title": "T", "text": "body"}) + "\n" + json.dumps({"id": "b", "contents": "c"}) + "\n",
    )
    docs = read_corpus(corpus)
    assert docs["a"].title == "T" and docs["b"].text == "c"
    assert set(read_corpus(corpus, wanted={"b"})) == {"b"}
    with pytest.raises(InputError, match=r"c2.jsonl:2: bad corpus record"):
        read_corpus(write(tmp_path, "c2.jsonl", json.dumps({"_id": "a", "text": ""}) + "\n{oops\n"))


def test_candidate_formats(tmp_path):
    rankgpt = [{"query": "q one", "hits": [{"content": "p", "qid": 5, "docid": "d1", "rank": 1, "score": 3.0},
                                           {"content": "p2", "qid": 5, "docid": "d2", "rank": 2, "score": 3.0}]}]
    b, fmt = read_candidates(write(tmp_path, "a.json", json.dumps(rankgpt)))
    assert fmt == "rankgpt-json" and b.topics == {"5": "q one"}
    assert [c.docid for c in b.runs["5"]] == ["d1", "d2"]  # file order kept
    acu = {"qid": 9, "q_text": "q", "bm25_results": [{"text": "x", "title": "T", "bm25_score": 1.0, "pid": "p"}],
           "qrels": {"p": 2}}
    b, fmt = read_candidates(write(tmp_path, "b.jsonl", json.dumps(acu) + "\n"))
    assert fmt == "acurank-jsonl" and b.qrels == {"9": {"p": 2}} and b.docs["p"].title == "T"
    rl = {"query": {"text": "q", "qid": "3"}, "candidates": [{"docid": "z", "score": 2.5, "doc": {"segment": "s"}}]}
    b, fmt = read_candidates(write(tmp_path, "c.jsonl", json.dumps(rl) + "\n"))
    assert fmt == "rankllm-jsonl" and b.docs["z"].text == "s"
    with pytest.raises(InputError, match=r"d.jsonl:2: bad JSON"):
        read_candidates(write(tmp_path, "d.jsonl", json.dumps(rl) + "\n{bad\n"))


def test_strictly_decreasing_scores():
    scores = strictly_decreasing([3.0, 3.0, 2.0, 2.0, 2.0])
    assert all(a > b for a, b in zip(scores, scores[1:]))
    text = run_lines("1", [Ranked("a", 1.0), Ranked("b", 1.0)], "tag")
    parsed = [float(line.split()[4]) for line in text.splitlines()]
    assert parsed[0] > parsed[1]


def test_nudged_scores_keep_the_listed_order_in_trec_eval():
    """trec_eval holds scores in single precision: a one-ulp nudge (1.0 then 0.9999999999999999) is a tie it
    breaks by docid (descending), reversing a listed a, b. The nudge is 2^-20 relative, which it sees."""
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator({"q": {"a": 1, "b": 0}}, {"P_1"})
    assert evaluator.evaluate({"q": {"a": 1.0, "b": math.nextafter(1.0, 0.0)}})["q"]["P_1"] == 0.0  # the ulp is lost
    for tied in (1.0, 16.11977305931295, 1e-20, 0.0, -3.5):
        a, b = strictly_decreasing([tied, tied])
        assert evaluator.evaluate({"q": {"a": a, "b": b}})["q"]["P_1"] == 1.0
        assert b == tied - max(abs(tied) * 2.0 ** -20, 1e-30)
    # scores already further apart than the nudge are kept as they are
    assert strictly_decreasing([3.0, 2.0, 1.0]) == [3.0, 2.0, 1.0]


def test_truncated_gzip_and_binary_files_are_input_errors(tmp_path):
    p = tmp_path / "c.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(json.dumps({"_id": "a", "text": "x" * 5000}) + "\n")
    (tmp_path / "t.jsonl.gz").write_bytes(p.read_bytes()[:40])
    with pytest.raises(InputError, match="corrupt or truncated gzip"):
        read_corpus(tmp_path / "t.jsonl.gz")
    (tmp_path / "b.run").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InputError, match="not UTF-8"):
        read_run(tmp_path / "b.run")


def test_unreadable_inputs_are_one_line_errors(tmp_path):
    """A file that exists but cannot be read (root ignores chmod 000, so use /proc/self/mem, which
    refuses reads at offset 0) and a directory: InputError naming it, never an OSError."""
    from acurank_cli.errors import InputError
    from acurank_cli.io.collection_files import read_qrels, read_topics
    from acurank_cli.io.runs import read_run

    for reader in (read_run, read_topics, read_qrels):
        with pytest.raises(InputError, match="cannot read"):
            reader("/proc/self/mem")
        with pytest.raises(InputError, match="is a directory"):
            reader(str(tmp_path))


def test_bom_is_not_part_of_the_first_id(tmp_path):
    from acurank_cli.io.candidates import read_candidates
    from acurank_cli.io.collection_files import read_qrels

    (tmp_path / "q.txt").write_text("\ufeff1 0 d1 2\n1 0 d2 0\n", encoding="utf-8")
    assert read_qrels(tmp_path / "q.txt") == {"1": {"d1": 2, "d2": 0}}
    rec = {"query": {"qid": 1, "text": "q"}, "candidates": [{"docid": "d1", "score": 1.0, "doc": {"segment": "x"}}]}
    (tmp_path / "c.jsonl").write_text("\ufeff" + json.dumps(rec) + "\n", encoding="utf-8")
    bundle, fmt = read_candidates(tmp_path / "c.jsonl")
    assert fmt == "rankllm-jsonl" and list(bundle.runs) == ["1"]


@pytest.mark.parametrize("content, fragment", [
    ('{"query": {"qid": 1, "text": "q"}, "candidates": [{"docid": "d1", "score": 1.0}, {"docid": "d1", "score": 0.5}]}',
     "docid d1 repeated"),
    ('{"query": {"qid": 1, "text": "q"}, "candidates": [["d1", 1.0]]}', "a candidate is a JSON list"),
    ('{"query": {"qid": 1, "text": "q"}, "candidates": [{"docid": "a b", "score": 1.0}]}', "holds whitespace"),
    ('{"query": {"qid": 1, "text": "q"}, "candidates": [{"docid": "d", "score": "nan"}]}', "not a finite number"),
    ('{"query": {"qid": 1, "text": "q"}, "candidates": [{"docid": "d", "score": ' + "1" * 5000 + '}]}', "bad JSON line"),
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
])
def test_candidate_file_errors_name_file_line_query_and_doc(tmp_path, content, fragment):
    from acurank_cli.errors import InputError
    from acurank_cli.io.candidates import read_candidates

    (tmp_path / "c.jsonl").write_text(content + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_candidates(tmp_path / "c.jsonl")
    assert fragment in str(info.value) and str(info.value).startswith(str(tmp_path / "c.jsonl"))
    assert "\n" not in str(info.value)


def test_conflicting_duplicates_are_errors(tmp_path):
    from acurank_cli.errors import InputError
    from acurank_cli.io.collection_files import read_qrels, read_topics

    (tmp_path / "q.txt").write_text("1 0 d1 2\n1 0 d1 2\n1 0 d1 0\n")
    with pytest.raises(InputError, match=r"q.txt:3: query 1 doc d1 judged twice"):
        read_qrels(tmp_path / "q.txt")
    (tmp_path / "t.tsv").write_text("1\tfirst\n1\tfirst\n1\tsecond\n")
    with pytest.raises(InputError, match=r"t.tsv:3: topic 1 given twice"):
        read_topics(tmp_path / "t.tsv")


def test_run_record_is_the_one_view_of_a_run(tmp_path):
    """read_run gives a Run: a read-only qid -> candidates mapping in file order, its scores for evaluation,
    a restriction to some queries, and write_run writes it back line for line."""
    from acurank_cli.io.writers import write_run
    from acurank_cli.records import Candidate, Run

    p = tmp_path / "r.run"
    p.write_text("q2 Q0 b 1 3.5 x\nq2 Q0 a 2 3.5 x\nq1 Q0 c 1 1.25 x\n")
    run = read_run(p)
    assert isinstance(run, Run) and list(run) == ["q2", "q1"] and len(run) == 2
    assert run["q2"] == (Candidate("b", 3.5), Candidate("a", 3.5))
    assert run.scores() == {"q2": {"b": 3.5, "a": 3.5}, "q1": {"c": 1.25}}
    assert list(run.restrict({"q1", "q9"})) == ["q1"]
    out = io.StringIO()
    write_run(out, run, "x")
    assert out.getvalue() == p.read_text()
    with pytest.raises(TypeError):
        run["q3"] = ()  # type: ignore[index]


def test_qids_take_long_lists_and_at_files(sample, tmp_path):
    """A few hundred ids in a comma list ended in OSError (File name too long)."""
    from acurank_cli.errors import InputError
    from acurank_cli.io.collection_files import read_qids
    from conftest import acurank

    many = ",".join(str(1000000 + i) for i in range(400))
    assert len(read_qids(many)) == 400
    assert read_qids("x" * 5000) == {"x" * 5000}  # a word too long to be a path is an id
    listed = tmp_path / "ids.txt"
    listed.write_text("19335\n47923\n")
    assert read_qids(f"@{listed}") == read_qids(str(listed)) == {"19335", "47923"}
    with pytest.raises(InputError, match="--qids @"):
        read_qids(f"@{tmp_path / 'missing.txt'}")
    qids = [l.split()[0] for l in (sample / "dl19" / "bm25.run").read_text().splitlines()]
    wanted = ",".join(dict.fromkeys(qids)) + "," + ",".join(str(9000000 + i) for i in range(300))
    bad = acurank("eval", sample / "dl19" / "bm25.run", "--qrels", sample / "dl19" / "qrels.txt", "--qids", wanted,
                  check=False)
    assert bad.returncode == 0 and "Traceback" not in bad.stderr


def test_a_docid_twice_in_a_corpus_is_an_error_naming_both_lines(tmp_path):
    """A duplicate _id was accepted silently (the last one won)."""
    from acurank_cli.errors import InputError
    from acurank_cli.io.collection_files import read_corpus

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "a", "text": "one"}\n{"_id": "b", "text": "two"}\n{"_id": "a", "text": "three"}\n')
    with pytest.raises(InputError, match=r"docid a appears twice with different texts \(lines 1 and 3\)") as exc:
        read_corpus(corpus)
    assert "c.jsonl:3" in exc.value.cli()
    assert set(read_corpus(corpus, {"b"})) == {"b"}  # not among the wanted: not read
    corpus.write_text('{"_id": "a", "text": "one"}\n{"_id": "a", "text": "one"}\n')
    assert read_corpus(corpus)["a"].text == "one"  # the same record twice: harmless


def test_a_gzip_run_on_stdin_is_read(sample, tmp_path):
    """A gzip file on stdin said "found 9 columns"; stdin is gunzipped as files are."""
    import gzip as _gzip
    import subprocess
    import sys

    from conftest import ENV, acurank

    run = (sample / "dl19" / "bm25.run").read_bytes()
    qrels = sample / "dl19" / "qrels.txt"
    plain = acurank("eval", "-", "--qrels", qrels, stdin=run.decode()).stdout
    assert acurank("eval", "-", "--qrels", qrels, stdin=_gzip.compress(run)).stdout == plain
    piped = subprocess.run([sys.executable, "-m", "acurank_cli", "eval", "-", "--qrels", str(qrels)],
                           input=_gzip.compress(run), capture_output=True, env=ENV)
    assert piped.returncode == 0 and piped.stdout.decode() == plain == "ndcg_cut_10\tall\t0.5058\n"
