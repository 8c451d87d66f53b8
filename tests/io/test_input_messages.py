"""The one-line error contract, word for word: every reader's message for each kind of bad input is
``FILE:LINE: message`` (or ``FILE: message`` when no line applies), exactly as written here."""

from __future__ import annotations

import gzip
import os
import threading

import pytest

from acurank_cli.errors import InputError
from acurank_cli.io.candidates import read_candidates
from acurank_cli.io.collection_files import read_corpus, read_qids, read_qrels, read_topics
from acurank_cli.io.runs import read_run, read_scores
from acurank_cli.relevance import Pivot

CASES = [
    # reader, file name, content, expected message after "FILE"
    (read_run, "a.run", "1 Q0 a 1 2.0 t\n1 Q0 b 2\n", ":2: expected 6 columns 'qid Q0 docid rank score tag', found 4"),
    (read_run, "a.run", "1 Q0 a 1 x t\n", ":1: score 'x' is not a number"),
    (read_run, "a.run", "1 Q0 a 1 nan t\n", ":1: score nan is not a finite number"),
    (read_run, "a.run", "1 Q0 a 1 -inf t\n", ":1: score -inf is not a finite number"),
    (read_run, "a.run", "1 Q0 a 1 1e999 t\n", ":1: score 1e999 (beyond the range of a 64-bit float) is not a finite number"),
    (read_run, "a.run", "1 Q0 a 1 1 t\n\n1 Q0 a 2 1 t\n", ":3: docid a repeated in query 1"),
    # a query in two blocks (the file not grouped by query): the repeat is refused at its own line, by every reader
    (read_run, "a.run", "1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n1 Q0 b 2 1 t\n1 Q0 a 3 1 t\n", ":4: docid a repeated in query 1"),
    (read_scores, "a.run", "1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n\n1 Q0 a 3 1 t\n", ":4: docid a repeated in query 1"),
    (read_candidates, "a.run", "1 Q0 a 1 1 t\n2 Q0 a 1 1 t\n1 Q0 a 3 1 t\n", ":3: docid a repeated in query 1"),
    (read_run, "a.run", "1\x01 Q0 a 1 1 t\n", ":1: qid '1\\x01' is empty or holds whitespace or control characters"),
    (read_run, "a.run", "1 Q0 a\x7f 1 1 t\n", ":1: docid 'a\\x7f' is empty or holds whitespace or control characters"),
    (read_run, "a.run", "\n \n", ": run file is empty"),
    (read_topics, "t.tsv", "1 no tab\n", ":1: expected 'qid<TAB>query text'"),
    (read_topics, "t.tsv", "1\t \n", ":1: topic 1 has no query text after its tab"),  # was "expected qid<TAB>..."
    (read_topics, "t.tsv", "\tsome text\n", ":1: expected 'qid<TAB>query text'"),
    (read_topics, "t.tsv", "1\ta\n1\ta\n1\tb\n", ":3: topic 1 given twice with different texts"),
    # --pivot's file has topics' form, and its refusals speak of pivots (they spoke of a topic's query text)
    (lambda path: Pivot.of(str(path)), "p.tsv", "1\t \n", ":1: the pivot of query 1 has no pivot passage after its tab"),
    (lambda path: Pivot.of(str(path)), "p.tsv", "1 no tab\n", ":1: expected 'qid<TAB>pivot passage'"),
    (read_qrels, "q.txt", "1 0 a\n", ":1: expected 4 columns 'qid iter docid grade', found 3"),
    (read_qrels, "q.txt", "1 0 a x\n", ":1: grade 'x' is not an integer"),
    (read_qrels, "q.txt", "1 0 a 1\n1 0 a 1\n1 0 a 2\n", ":3: query 1 doc a judged twice with different grades"),
    (read_qrels, "q.txt", "\n", ": qrels file is empty"),
    (read_corpus, "c.jsonl", '{"x": 1}\n', ":1: bad corpus record (expected {_id,title,text} or {id,contents})"),
    (read_corpus, "c.jsonl", '{"_id": "a", "text": "x"}\nnot json\n', ":2: bad corpus record (Expecting value)"),
    (read_corpus, "c.jsonl", '{"_id": "a b", "text": "x"}\n', ":1: docid 'a b' is empty or holds whitespace or control characters"),
    (read_corpus, "c.jsonl", "[" * 100_000 + "\n", ":1: bad corpus record (JSON nested too deeply)"),
    # a lone surrogate escaped in a title or a text: no UTF-8 encodes it (a traceback in the run's digest, stop 103)
    (read_corpus, "c.jsonl", '{"_id": "a", "text": "\\ud83d\\ude42 ok"}\n{"_id": "b", "title": "\\ud800", "text": "x"}\n',
     ":2: bad corpus record (not valid Unicode text: a lone surrogate, '\\ud800', escaped in a string)"),
    (read_corpus, "c.jsonl", '{"_id": "a", "text": "LPS \\uDFFF means"}\n',
     ":1: bad corpus record (not valid Unicode text: a lone surrogate, '\\udfff', escaped in a string)"),
    (read_candidates, "c.json", '[{"query": "q \\ud800", "hits": [{"docid": "a", "score": 1}]}]',
     ": bad JSON (not valid Unicode text: a lone surrogate, '\\ud800', escaped in a string)"),
    (read_candidates, "c.json", "[1,2", ":1: bad JSON (Expecting ',' delimiter)"),
    (read_candidates, "c.json", "[]", ": candidate file holds no queries"),
    (read_candidates, "c.json", '{"a": 1}\n', ":1: unrecognised candidate file (expected a TREC run, RankGPT JSON, "
                                             "AcuRank JSONL or RankLLM JSONL)"),
    (read_candidates, "c.json", '{"a": 1}\n{bad\n', ":2: bad JSON line (Expecting property name enclosed in double quotes)"),
    (read_candidates, "c.json", '"just a string"', ":1: expected 6 columns 'qid Q0 docid rank score tag', found 3"),
]




def test_file_level_messages(tmp_path):
    missing = tmp_path / "nope.run"
    with pytest.raises(InputError) as exc:
        read_run(missing)
    assert str(exc.value) == f"{missing}: no such file"
    with pytest.raises(InputError) as exc:
        read_run(tmp_path)
    assert str(exc.value) == f"{tmp_path}: is a directory, expected a file"
    binary = tmp_path / "b.run"
    binary.write_bytes(b"\xff\xfe\x00\x81 binary")
    with pytest.raises(InputError) as exc:
        read_run(binary)
    assert str(exc.value) == f"{binary}:1: not UTF-8 text: a binary file? (a NUL byte on this line)"
    fifo = tmp_path / "w.fifo"  # a FIFO is read once: said without the place, never opened again (that would hang)
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes("1 Q0 caf\u00e9 1 1 t\n".encode("cp1252")))
    writer.start()
    with pytest.raises(InputError) as exc:
        read_run(fifo)
    writer.join(10)
    assert str(exc.value) == f"{fifo}: not UTF-8 text (a binary file, or another encoding: convert it with iconv -t UTF-8)"
    for name, opener in (("w.run", open), ("w.run.gz", gzip.open)):  # Windows-1252 text: its line, byte and remedy
        latin = tmp_path / name
        with opener(latin, "wb") as fh:
            fh.write("1 Q0 a 1 1 t\n1 Q0 caf\u00e9 2 0.5 t\n".encode("cp1252"))
        with pytest.raises(InputError) as exc:
            read_run(latin)
        plain = f"iconv -f WINDOWS-1252 -t UTF-8 {latin} > {latin}.utf8"
        piped = f"zcat {latin} | iconv -f WINDOWS-1252 -t UTF-8 > {tmp_path / 'w.run.utf8'}"
        assert str(exc.value) == (f"{latin}:2: not UTF-8 text: byte 0xe9 at byte 21 of the "
                                  f"{'uncompressed ' if opener is gzip.open else ''}file; in another encoding "
                                  f"(Windows-1252, Latin-1)? convert it: {piped if opener is gzip.open else plain}")
    bad_gz = tmp_path / "b.run.gz"
    bad_gz.write_bytes(gzip.compress(b"1 Q0 a 1 1 t\n")[:-6])
    with pytest.raises(InputError) as exc:
        read_run(bad_gz)
    assert str(exc.value).startswith(f"{bad_gz}: corrupt or truncated gzip file (")


def test_qids_messages():
    with pytest.raises(InputError) as exc:
        read_qids(" , ,")
    assert str(exc.value) == "--qids: no query ids given"
    with pytest.raises(InputError) as exc:
        read_qids("1,a\tb")
    assert str(exc.value) == "--qids: qid 'a\\tb' is empty or holds whitespace or control characters"


def jl(*records) -> str:
    import json

    return "".join(json.dumps(r) + "\n" for r in records)


def acu(**over):
    rec = {"qid": 1, "q_text": "q", "bm25_results": [{"pid": "a", "bm25_score": 1.5, "text": "t"}]}
    rec.update(over)
    return rec


def llm(**over):
    rec = {"query": {"qid": 1, "text": "q"}, "candidates": [{"docid": "a", "score": 1, "doc": {"segment": "s"}}]}
    rec.update(over)
    return rec


BAD = "bad acurank-jsonl record"
CANDIDATE_CASES = [
    # AcuRank JSONL: a line per query, so the line is named
    (jl(acu(bm25_results="x")), f":1: {BAD} ('bm25_results' is a JSON str, expected a list)"),
    (jl(acu(bm25_results=[5])), f":1: {BAD} (a bm25_results entry is a JSON int, expected an object)"),
    (jl(acu(bm25_results=[{"pid": True, "bm25_score": 1}])), f":1: {BAD} (pid True is not a string)"),
    (jl(acu(bm25_results=[{"pid": "a", "bm25_score": [1]}])), f":1: {BAD} (a score [1] is not a number)"),
    (jl(acu(bm25_results=[{"pid": "a", "bm25_score": 1, "title": [1]}])), f":1: {BAD} (title [1] is not a string)"),
    (jl(acu(bm25_results=[{"pid": "a", "bm25_score": 1, "text": None}])), f":1: {BAD} (text None is not a string)"),
    (jl(acu(qid=1.5)), f":1: {BAD} (qid 1.5 is not a string or integer)"),
    (jl({"qid": 1, "bm25_results": []}), f":1: {BAD} (missing field 'q_text')"),
    (jl(acu(), acu(qrels=[1])), f":2: {BAD} (query 1 appears twice)"),
    (jl(acu(qrels=[1])), f":1: {BAD} ('qrels' is a JSON list, expected an object)"),
    (jl(acu(qrels={"a": True})), f":1: {BAD} (grade True is not an integer)"),
    (jl(acu(qrels={"a": "x"})), f":1: {BAD} (invalid literal for int() with base 10: 'x')"),
    (jl(acu(qrels={"a b": 1})), ":1: docid 'a b' is empty or holds whitespace or control characters"),
    (jl(acu(bm25_results=[{"pid": "a", "bm25_score": 1}, {"pid": "a", "bm25_score": 2}])),
     f":1: {BAD} (query 1: docid a repeated)"),
    (jl(acu(bm25_results=[{"pid": "a", "bm25_score": "nan"}])), ":1: query 1 doc a: score nan is not a finite number"),
    (jl(acu(bm25_results=[{"pid": "a\tb", "bm25_score": 1}])),
     ":1: query 1: docid 'a\\tb' is empty or holds whitespace or control characters"),
    # RankGPT JSON: one list, so the record is named instead of a line
    ('[{"query": "q", "hits": [{"qid": 1, "docid": "a", "score": 1, "content": 7.5}]}]',
     ": query record 1: bad rankgpt-json record (content 7.5 is not a string)"),
    ('[{"query": "q", "hits": [3]}]', ": query record 1: bad rankgpt-json record (a hit is a JSON int, expected an object)"),
    ('[{"query": "q", "hits": []}]', ": query record 1: qid '' is empty or holds whitespace or control characters"),
    ('[{"query": "q", "hits": [{"qid": 1, "docid": "a", "content": "c"}]}]',
     ": query record 1: bad rankgpt-json record (missing field 'score')"),
    # RankLLM JSONL
    (jl(llm(query="q")), ":1: bad rankllm-jsonl record ('query' is a JSON str, expected an object)"),
    (jl(llm(candidates={"a": 1})), ":1: bad rankllm-jsonl record ('candidates' is a JSON dict, expected a list)"),
    (jl(llm(candidates=["x"])), ":1: bad rankllm-jsonl record (a candidate is a JSON str, expected an object)"),
    (jl(llm(candidates=[{"docid": "a", "score": 1, "doc": 5}])),
     ":1: bad rankllm-jsonl record (a candidate's 'doc' is a JSON int, expected an object)"),
    (jl(llm(query={"qid": 1, "text": [1]})), ":1: bad rankllm-jsonl record (query text [1] is not a string)"),
    (jl(llm(candidates=[{"docid": "a", "score": True}])), ":1: bad rankllm-jsonl record (a score True is not a number)"),
]




# ------------------------------------------------------------------ ids, names and accepted shapes

ID_CASES = [
    (read_qrels, "q.txt", "1\x01 0 a 1\n", ":1: qid '1\\x01' is empty or holds whitespace or control characters"),
    (read_qrels, "q.txt", "1 0 a 1\n1 0 a\x7f 1\n", ":2: docid 'a\\x7f' is empty or holds whitespace or control characters"),
    (read_topics, "t.tsv", "\tq\n", ":1: expected 'qid<TAB>query text'"),
    (read_topics, "t.tsv", "1\x01\tq\n", ":1: qid '1\\x01' is empty or holds whitespace or control characters"),
    (read_qids, "ids.txt", "q1\nq\x01 x\n", ":2: qid 'q\\x01' is empty or holds whitespace or control characters"),
]


@pytest.mark.parametrize("reader,name,content,message", CASES + ID_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES + ID_CASES)])
def test_reader_messages_word_for_word(tmp_path, reader, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        reader(str(path))  # a path as the command line gives it (read_qids takes only that)
    assert str(exc.value) == f"{path}{message}"


def test_topics_keep_tabs_and_line_ends_out(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_bytes(b"1\ta\tb\r\n2\t  spaced  \n")
    assert read_topics(path) == {"1": "a\tb", "2": "spaced"}


def test_qids_from_a_file_a_list_or_stdin(tmp_path, monkeypatch):
    import io

    path = tmp_path / "ids.txt"
    path.write_text("q1 first column only\n\nq2\tmore\n")
    assert read_qids(str(path)) == {"q1", "q2"}
    assert read_qids("a, b,,c") == {"a", "b", "c"}
    monkeypatch.setattr("sys.stdin", io.StringIO("x\ny 0\n"))
    assert read_qids("-") == {"x", "y"}


def test_sources_are_named_path_stdin_or_stream(monkeypatch):
    import io

    with pytest.raises(InputError) as exc:
        read_run(io.StringIO("1 Q0 a 1 x t\n"))
    assert str(exc.value) == "<stream>:1: score 'x' is not a number"
    monkeypatch.setattr("sys.stdin", io.StringIO("1 Q0 a 1 x t\n"))
    with pytest.raises(InputError) as exc:
        read_run("-")
    assert str(exc.value) == "<stdin>:1: score 'x' is not a number"
    named = io.StringIO("1 Q0 a 1 x t\n")
    named.name = "named.run"
    with pytest.raises(InputError) as exc:
        read_run(named)
    assert str(exc.value) == "named.run:1: score 'x' is not a number"


def test_corpus_record_shapes(tmp_path):
    from acurank_cli.records import Doc

    path = tmp_path / "c.jsonl"
    records = [
        {"_id": "b1", "text": ""},
        {"_id": "b2", "title": None, "text": "t"},
        {"_id": 3, "title": "T", "text": "t"},
        {"id": "p1", "contents": "c"},
        {"docid": "r1", "segment": "s", "title": "T"},
        {"docid": "r2", "contents": "c"},
        {"docid": 5, "text": "t", "contents": "c", "segment": "s", "title": None},
        {"docid": "r3", "text": ""},
    ]
    path.write_text(jl(*records))
    assert read_corpus(path) == {
        "b1": Doc("b1", "", ""), "b2": Doc("b2", "t", ""), "3": Doc("3", "t", "T"), "p1": Doc("p1", "c", ""),
        "r1": Doc("r1", "s", "T"), "r2": Doc("r2", "c", ""), "5": Doc("5", "t", ""), "r3": Doc("r3", "", ""),
    }
    assert read_corpus(path, wanted={"b1", "zz"}) == {"b1": Doc("b1", "", "")}
    for record, why in (({"_id": "b1"}, "missing field 'text'"), ({"docid": "r3"}, "missing field 'text'"),
                        ({"_id": "b", "text": None}, "text None is not a string")):
        path.write_text(jl(record))  # a record without its text, or with a text that is not one: never ""
        with pytest.raises(InputError) as exc:
            read_corpus(path)
        assert str(exc.value) == f"{path}:1: bad corpus record ({why})"
    path.write_text(jl({"id": "p1"}))  # an id without contents is neither shape
    with pytest.raises(InputError) as exc:
        read_corpus(path)
    assert str(exc.value) == f"{path}:1: bad corpus record (expected {{_id,title,text}} or {{id,contents}})"


def test_reason_fallbacks():
    from acurank_cli.io.sources import json_reason

    assert json_reason(ValueError()) == "ValueError"
    assert json_reason(KeyError()) == "missing field"
    assert json_reason(KeyError("k")) == "missing field 'k'"
    assert json_reason(ValueError("first\nsecond")) == "first"
    assert json_reason(ValueError("x" * 200)) == "x" * 160


def test_candidate_shapes_and_depth(tmp_path):
    from acurank_cli.records import Candidate, Doc

    path = tmp_path / "c.jsonl"
    path.write_text(jl(acu(bm25_results=[{"pid": "a", "bm25_score": 2}, {"pid": "b", "bm25_score": 1, "title": None}]),
                       acu(qid="2", q_text="q2", qrels={"a": "1", "b": 0})))
    bundle, fmt = read_candidates(path, depth=1)
    assert fmt == "acurank-jsonl" and bundle.runs == {"1": (Candidate("a", 2.0),), "2": (Candidate("a", 1.5),)}
    # a passage seen twice keeps its last text ("t" in the second record); a candidate without a text has no
    # passage here (it is looked up as a run's candidates are: --corpus, the passages beside RUN), never ""
    assert bundle.docs == {"a": Doc("a", "t", "")} and bundle.topics == {"1": "q", "2": "q2"}
    assert bundle.qrels == {"2": {"a": 1, "b": 0}}
    path.write_text(jl(llm(candidates=[{"docid": "a", "score": 2, "doc": {"text": "t", "contents": "c"}},
                                       {"docid": "b", "score": 1, "doc": {"contents": "c", "title": None}},
                                       {"docid": "c", "score": 0}])))
    bundle, fmt = read_candidates(path)
    assert fmt == "rankllm-jsonl" and [c.docid for c in bundle.runs["1"]] == ["a", "b", "c"]
    assert bundle.docs == {"a": Doc("a", "t", ""), "b": Doc("b", "c", "")}
    path.write_text('\n [{"query": "q", "qid": 7, "hits": []},\n {"query": "r", "hits": [{"qid": 8, "docid": "d", '
                    '"score": 1, "content": "x"}, {"qid": 8, "docid": "e", "score": 0, "content": "y"}]}]')
    bundle, fmt = read_candidates(path, depth=1)
    assert fmt == "rankgpt-json" and bundle.runs == {"7": (), "8": (Candidate("d", 1.0),)}
    assert bundle.docs["d"] == Doc("d", "x") and bundle.topics == {"7": "q", "8": "r"}
    path.write_text("2 Q0 a 1 1 t\r\n2 Q0 b 2 3 t\r\n")
    bundle, fmt = read_candidates(path, depth=1)
    assert fmt == "trec" and bundle.runs == {"2": (Candidate("b", 3.0),)}


LABEL_CASES = [
    (jl(acu(q_text=[1])), f":1: {BAD} (q_text [1] is not a string)"),
    ('[{"query": 5.5, "hits": []}]', ": query record 1: bad rankgpt-json record (query 5.5 is not a string)"),
    ('[{"query": "q", "hits": "x"}]', ": query record 1: bad rankgpt-json record ('hits' is a JSON str, expected a list)"),
    ('[{"query": "q", "hits": [{"qid": 1, "docid": [1], "score": 1, "content": "c"}]}]',
     ": query record 1: bad rankgpt-json record (docid [1] is not a string)"),
    ('[{"query": "q", "hits": [{"qid": 1, "docid": "d", "score": [1], "content": "c"}]}]',
     ": query record 1: bad rankgpt-json record (d score [1] is not a number)"),
    ('[{"query": "q", "qid": 1, "hits": []}, 5]',
     ": query record 2: bad rankgpt-json record (the record is a JSON int, expected an object)"),
    (jl(llm(candidates=[{"docid": [1], "score": 1}])), ":1: bad rankllm-jsonl record (docid [1] is not a string)"),
    (jl(llm(candidates=[{"docid": "a", "score": 1, "doc": {"segment": [1]}}])),
     ":1: bad rankllm-jsonl record (segment [1] is not a string)"),
    (jl(llm(candidates=[{"docid": "a", "score": 1, "doc": {"title": [1]}}])),
     ":1: bad rankllm-jsonl record (title [1] is not a string)"),
    (jl(acu(qrels={"a": "x" * 300})), f":1: {BAD} (" + ("invalid literal for int() with base 10: '" + "x" * 300)[:160] + ")"),
]


@pytest.mark.parametrize("content,message", CANDIDATE_CASES + LABEL_CASES,
                         ids=[str(i) for i in range(len(CANDIDATE_CASES) + len(LABEL_CASES))])
def test_candidate_file_messages_word_for_word(tmp_path, content, message):
    path = tmp_path / "c.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_candidates(path)
    assert str(exc.value) == f"{path}{message}"


def test_blank_lines_and_empty_files(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(jl(acu()) + "\n  \n" + jl(acu(qid=2)))
    bundle, _ = read_candidates(path)
    assert list(bundle.runs) == ["1", "2"]  # a blank line does not end the file
    path.write_text("")
    with pytest.raises(InputError) as exc:
        read_candidates(path)
    assert str(exc.value) == f"{path}: run file is empty"
