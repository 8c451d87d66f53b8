"""One rule, one refusal, at every entrance (issue 82): the parity table. Each row is a rule whose input must be
refused before any model call; each column an entrance (the command line's ``rerank``, the Python API's
``Reranker``, ``acurank serve`` and ``acurank mcp`` at start). Every cell is the same one line: the command-line
entrances (CLI, serve, MCP) word for word, the API with its keywords where the others name flags. The messages
below are written from the rules (docs/relevance.md, docs/long-documents.md), not recorded; the table in
docs/parity.md is made from ROWS and checked here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ENV, ROOT, acurank

from acurank_cli.errors import InputError
from acurank_cli.records import RerankResult
from acurank_cli.rerankers.backend import RerankerBase

DL19 = ROOT / "sample_runs" / "dl19"


@dataclass(frozen=True)
class Row:
    """A rule: its flags (CLI, serve, MCP), its keywords (API), the reranker, and its refusal in both spellings."""

    rule: str
    flags: tuple[str, ...]
    keywords: dict
    cli: str
    api: str
    reranker: str = "minilm"


MAP = "{map}"  # the map fit with minilm and acurank at k = 10 (made per test)
SIM_MAP = "{sim_map}"  # the same map, fit with the simulated reranker
ABS_MAP = "{abs_map}"  # a map fit with --absolute (the reranker's own score of each document as a feature)
ABSOLUTE = ("the map reads each document's own score from its reranker (fit with --absolute), and reranker "
            "openai:gpt-4o-mini gives none (a pointwise reranker does: minilm, ce:)")
CALIBRATED = "P(relevant) is calibrated on documents ranked whole; rank them whole, or without a map"
PASSAGES = "must be WORDS or WORDS:STRIDE, whole numbers of at least 1 (e.g. 150 or 150:75)"
ROWS = (
    Row("a map at another k", ("--calibration", MAP, "--k", "5"), {"calibration": MAP, "k": 5},
        "--calibration: the map was fit on p_topk at k = 10 and this k is 5: give --k 10, or fit a map at k = 5",
        "calibration: the map was fit on p_topk at k = 10 and this k is 5: give k = 10, or fit a map at k = 5"),
    Row("a map at another init", ("--calibration", MAP, "--init", "zscore"), {"calibration": MAP, "init": "zscore"},
        "--calibration: the map was fit on ratings started with init score and this init is zscore: give --init "
        "score, or fit a map with init zscore",
        "calibration: the map was fit on ratings started with init score and this init is zscore: give init = "
        "'score', or fit a map with init zscore"),
    Row("a map on a method without ratings", ("--calibration", MAP, "--method", "sw-1"),
        {"calibration": MAP, "method": "sw-1"},
        "--calibration: method 'sw-1' keeps no ratings to calibrate (the acurank and acurank-auto families do)",
        "calibration: method 'sw-1' keeps no ratings to calibrate (the acurank and acurank-auto families do)"),
    Row("a map with passages", ("--calibration", MAP, "--passages", "100"), {"calibration": MAP, "passages": "100"},
        f"--calibration with --passages: {CALIBRATED}", f"calibration with passages: {CALIBRATED}"),
    Row("a map fit with another reranker", ("--calibration", SIM_MAP), {"calibration": SIM_MAP},
        "--calibration: the map was fit with reranker simulated and this run's reranker is minilm: its P(relevant) "
        "reads the ratings one reranker makes; fit a map with minilm, or say --allow-map-mismatch",
        "calibration: the map was fit with reranker simulated and this run's reranker is minilm: its P(relevant) "
        "reads the ratings one reranker makes; fit a map with minilm, or say allow_map_mismatch=True"),
    Row("a bad --passages", ("--passages", "abc"), {"passages": "abc"},
        f"--passages abc: {PASSAGES}", f"passages='abc': {PASSAGES}"),
    Row("gated thinking on a method without uncertainty", ("--method", "sw-1", "--thinking", "gated"),
        {"method": "sw-1", "thinking": "gated"},
        "--thinking gated lets a method's uncertainty decide which windows think: method 'sw-1' has none (use the "
        "acurank family or acurank-auto, or --thinking on|off)",
        "thinking='gated' lets a method's uncertainty decide which windows think: method 'sw-1' has none (use the "
        "acurank family or acurank-auto, or thinking='on' or 'off')",
        reranker="openai:gpt-4o-mini"),
    Row("a map fit with --absolute on a reranker that scores no document alone", ("--calibration", ABS_MAP),
        {"calibration": ABS_MAP},
        f"--calibration: {ABSOLUTE}", f"calibration: {ABSOLUTE}", reranker="openai:gpt-4o-mini"),
    Row("an instruction the reranker cannot take", ("--instruction", "Rank by recency"),
        {"instruction": "Rank by recency"},
        "reranker 'minilm' has no option --instruction (its options: --device, --batch-size)",
        "reranker 'minilm' has no option instruction (its options: device, batch_size)"),
)
ENTRANCES = ("CLI", "API", "HTTP (serve)", "MCP", "PyTerrier")

PIVOT_MAP = "{pivot_map}"  # a map fit with a pivot (the per-request rows' reranker, acurank, k = 10)
JOINS = "a pivot joins windows of documents ranked whole"
TEXTS = "is the simulated reranker's pivot; reranker openai:gpt-4o-mini reads texts: give"


@dataclass(frozen=True)
class Call:
    """A rule a call breaks, refused at every entrance in its own words: the command line's flags, the API's
    keywords (``pivot`` among the call's), a request's fields (``serve``'s ``POST /v2/rerank`` and the MCP ``rerank``
    tool of the server started with ``server`` flags, a 400 naming ``field``). The reranker reads texts and is never
    called (openai: at a closed port)."""

    rule: str
    flags: tuple[str, ...]
    keywords: dict
    call: dict
    server: tuple[str, ...]
    fields: dict
    cli: str | None  # None: the command line has no such input
    api: str
    http: str
    field: str = "pivot"
    reranker: tuple[str, ...] = ("openai:gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1")
    #: the command line's inputs (default: DL19's query 264014 with its topics and passages)
    inputs: tuple[str, ...] | None = None
    #: what the API raises (a keyword Python itself refuses: TypeError)
    error: type = InputError
    #: PyTerrier's transformer's refusal of a frame holding the call's documents (query q1, docnos d1, d2, ...); None:
    #: a frame carries no such input (its transformer takes no pivot, cut or instruction of its own)
    pyterrier: str | None = None
    #: what the table says where the command line, or a frame, has no such input
    no_cli: str = "no such input (a run's instruction is `--instruction`: the row above)"
    no_frame: str = "no such input (a frame carries no pivot, cut or instruction)"


def _blank(rule: str, text: str, corpus: str) -> Call:
    """An empty document among the call's (the second, ``text``; ``corpus``: the command line's corpus that holds it
    as doc d2), refused where the reranker reads texts (records.Doc.blank)."""
    documents = {"documents": ["fleas live for weeks", text, "cats sleep a lot"]}
    said = "has no text (its text and title are empty): a model cannot judge it; give it a text or leave it out"
    return Call(rule, (), {}, documents, (), documents,
                f"{{run}}:2: doc d2 of query q1 has no text: its text and title are empty in {corpus} (1 without text in "
                "this query; a model cannot judge it: give it a text, or --skip-missing to keep it after the reranked "
                "ones)", f"documents[1]: {said}", f"documents[1]: {said}", field="documents[1]",
                inputs=("{run}", "--topics", "{topics}", "--corpus", corpus), pyterrier=f"query q1, docno d2: {said}")


CALLS = (
    Call("a map fit with a pivot, given none", ("--calibration", PIVOT_MAP), {"calibration": PIVOT_MAP}, {},
         ("--calibration", PIVOT_MAP), {},
         "--calibration: the map was fit with a pivot in every window, and this run has none: give --pivot",
         "calibration: the map was fit with a pivot in every window, and this call has none: give pivot",
         "this server's --calibration map: the map was fit with a pivot in every window, and this request has none: "
         "give pivot",
         pyterrier="calibration: the map was fit with a pivot in every window, and AcuRankReranker's call has none: "
                   "give a map fit without --pivot (AcuRankReranker carries no pivot)"),
    Call("a pivot with passages", ("--pivot", "{pivots}", "--passages", "100"), {"passages": "100"},
         {"pivot": "{text}"}, (), {"pivot": "{text}", "max_chunks_per_doc": 2},
         f"--pivot with --passages: {JOINS}", f"pivot with passages: {JOINS}", f"pivot with max_chunks_per_doc: {JOINS}"),
    Call("a map with a request's passages", ("--calibration", PIVOT_MAP, "--passages", "100"),
         {"calibration": PIVOT_MAP, "passages": "100"}, {}, ("--calibration", PIVOT_MAP), {"max_chunks_per_doc": 2},
         f"--calibration with --passages: {CALIBRATED}", f"calibration with passages: {CALIBRATED}",
         f"this server's --calibration map with max_chunks_per_doc: {CALIBRATED}", field="max_chunks_per_doc"),
    Call("a pivot that does not fit the backend", ("--pivot", "simulated"), {}, {"pivot": "simulated"}, (),
         {"pivot": "simulated"}, f"--pivot simulated {TEXTS} a file of 'qid<TAB>pivot passage'",
         f"pivot='simulated' {TEXTS} each query's pivot passage", f'pivot "simulated" {TEXTS} the query\'s pivot passage'),
    Call("a pivot on a method that rates none", ("--pivot", "{pivots}", "--method", "sw-1"), {"method": "sw-1"},
         {"pivot": "{text}"}, (), {"pivot": "{text}", "method": "sw-1"},
         "--pivot: method 'sw-1' rates no pivot (the acurank methods do)",
         "pivot: method 'sw-1' rates no pivot (the acurank methods do)",
         "pivot: method 'sw-1' rates no pivot (the acurank methods do)"),
    _blank("an empty document", " ", "{corpus}"),
    _blank("a document of only control or zero-width characters", "\u200b\x00", "{corpus_unseen}"),
    Call("a cut without a map", ("--cut", "f1"), {}, {"cut": "f1"}, (), {"cut": "f1"},
         "--cut needs --calibration MAP.json (the map that gives P(relevant))",
         "cut needs P(relevant): build the Reranker with calibration=MAP.json (docs/relevance.md)",
         "cut needs P(relevant): this server was started without --calibration MAP.json", field="cut"),
    Call("a cut target without a cut", ("--cut-target", "cut"), {}, {"cut_target": "cut"}, (), {"cut_target": "cut"},
         "--cut-target says where a cut's calls go; give --cut", "cut_target says where a cut's calls go; give cut",
         "cut_target says where a cut's calls go; give cut", field="cut_target"),
    Call("a misspelt field", ("--cutt", "f1"), {}, {"cutt": "f1"}, (), {"cutt": "f1"},
         "No such option: --cutt (Possible options: --cut, --cut-target, --output) (see 'acurank rerank --help')",
         "Reranker.rerank() got an unexpected keyword argument 'cutt'", "cutt is not a field of this endpoint",
         field="cutt", error=TypeError),
    Call("a number sent as a string", ("--k", "1.0"), {}, {"top_k": "5"}, (), {"top_n": "5"},
         "--k 1.0: must be an integer", "top_k='5': must be an integer >= 1", "top_n: Input should be a valid integer",
         field="top_n"),
    Call("a number outside its domain", ("--k", "0"), {}, {"top_k": 0}, (), {"top_n": 0},
         "--k 0: must be an integer >= 1", "top_k=0: must be an integer >= 1",
         "top_n: must be an integer >= 1", field="top_n"),
    Call("a boolean sent as a number", ("--k", "true"), {}, {"top_k": True}, (), {"top_n": True},
         "--k true: must be an integer", "top_k=True: must be an integer >= 1",
         "top_n: Input should be a valid integer", field="top_n"),
    Call("a blank method name", ("--method", " "), {"method": " "}, {}, (), {"method": " "},
         "--method ' ': must be a method name (leave it out for the default)",
         "method=' ': must be a method name (leave it out for the default)",
         "method=' ': must be a method name (leave it out for the default)", field="method"),
    Call("a blank instruction", ("--instruction", " "), {}, {"instruction": " "}, (), {"instruction": " "},
         "--instruction: must be a non-blank text, got ' '", "instruction: must be a non-blank text, got ' '",
         "instruction: must be a non-blank text, got ' '", field="instruction"),
    Call("a document's score that is not a number", (), {},
         {"documents": [{"text": "fleas live for weeks", "score": "high"}, {"text": "cats sleep a lot", "score": 1}]},
         (), {"documents": [{"text": "fleas live for weeks", "score": "high"}, {"text": "cats sleep a lot", "score": 1}]},
         None, "document 0: 'score' must be a number, got 'high'",
         "documents: document 0: 'score' must be a number, got 'high'", field="documents",
         no_cli="a run file's score column: its line named (io/runs.py)",
         no_frame="refused: `query q1, docno d1: column 'score' 'high' is not a number` (the ids and scores test)"),
    Call("a document object without a text", (), {}, {"documents": [{"content": "fleas live for weeks"}, "cats"]},
         (), {"documents": [{"content": "fleas live for weeks"}, "cats"]}, None,
         "document 0: needs a 'text' string",
         "documents[0] needs a 'text' string (or name its fields in rank_fields)", field="documents[0].text",
         no_cli="no such input (a run's texts are its corpus's)", no_frame="no such input (a frame's text is a column)"),
    Call("a cut given as a number", (), {}, {"cut": 0.3}, (), {"cut": 0.3}, None,
         "cut must be a string, got float (give '0.3')", "cut: Input should be a valid string", field="cut",
         no_cli="no such input (`--cut` is text)"),
    Call("two faults: top_n out of range and a cut given as a number (named in a server's schema order)", (), {},
         {"top_k": 0, "cut": 5}, (), {"top_n": 0, "cut": 5}, None, "top_k=0: must be an integer >= 1",
         "top_n: must be an integer >= 1", field="top_n", no_cli="no such input (a run has no top_n; `--cut` is text)"),
    Call("two faults: a blank pivot and a cut given as a number", (), {}, {"pivot": " ", "cut": 5}, (),
         {"pivot": " ", "cut": 5}, None, "cut must be a string, got int (give '5')",
         "cut: Input should be a valid string", field="cut", no_cli="no such input (`--cut` is text)"),
    Call("an instruction for one query the reranker cannot take", (), {}, {"instruction": "Rank by recency"}, (),
         {"instruction": "Rank by recency"}, None,
         "instruction: the reranker puts no instruction in a prompt (a listwise LLM does: hf:, vllm:, openai:)",
         "instruction: the reranker puts no instruction in a prompt (a listwise LLM does: hf:, vllm:, openai:)",
         field="instruction", reranker=("minilm",)),
)
@dataclass(frozen=True)
class Same:
    """A rule whose answer is a run: what each entrance gives (the test says how each cell is compared)."""

    rule: str
    cli: str
    api: str
    http: str
    mcp: str
    pyterrier: str


SAMES = (
    Same("`top_k`/`top_n` with a map (fit at k = 10)",
         "`--score p_relevant`: the run's first 5 lines are the API's `top_k=5` documents and P(relevant) (values "
         "that tie written nudged apart, as every run's scores, exact in the stats); k = 10",
         "`rerank(..., top_k=5)`: 5 documents, `out.k` = 10", "`top_n: 5`: the API's 5 (documents without scores), "
         "`relevance_score` = P(relevant), `meta.acurank.k` = 10", "the same results as HTTP",
         "`AcuRankReranker(calibration=MAP) % 5` (PyTerrier's rank cutoff): the API's 5 docnos and `p_relevant`"),
    Same("`min_p_relevant` and the cut `p:X`",
         "`--cut p:0.3 --score p_relevant`: the documents with P(relevant) >= 0.3, the API's",
         "`min_p_relevant=0.3` and `cut=\"p:0.3\"`: the same documents and P(relevant)",
         "`cut: \"p:0.3\"`: the API's `cut=\"p:0.3\"` (documents without scores), `meta.acurank.cut`",
         "the same results as HTTP", "no such input (a frame is cut with PyTerrier's own operators)"),
    Same("documents with their own ids and first-stage scores",
         "a run file's ids and scores", "`rerank(query, [{\"id\", \"text\", \"score\"}, ...], top_k=5)`",
         "the same objects: the API's order (as `index`) and p_topk; `top_n` beyond the documents sets k no higher "
         "than their number, as the API's `top_k`", "the same results as HTTP",
         "a frame's `docno` and `score`: the API's (checked in the run rows above)"),
    Same("an empty document, a reranker that reads no texts",
         "ranked: a plug-in that reverses each window (`ACURANK_BACKENDS`) puts it in its place", "ranked: the same order",
         "ranked: the same order; the simulated reranker, which orders by qrels, is refused at start: `--reranker "
         "simulated: it orders windows by qrels, and a served request's documents are in none: serve a reranker that "
         "reads the documents' texts`", "the same results as HTTP; the simulated reranker refused at start, as serve",
         "ranked: the same order (a frame with a blank `text`)"),
)
#: flags every entrance of a row's reranker needs that are not the rule's (a server that is never called)
BACKEND = {"openai:gpt-4o-mini": ("--base-url", "http://127.0.0.1:9/v1")}


def table() -> str:
    """The parity table as docs/parity.md shows it."""
    lines = ["| rule | " + " | ".join(ENTRANCES) + " |", "|---|" + "---|" * len(ENTRANCES)]
    for row in ROWS:
        lines.append(f"| {row.rule} | " + " | ".join(["refused: `" + row.cli + "`", "refused: `" + row.api + "`",
                                                       "refused at start, as the CLI", "refused at start, as the CLI",
                                                       "refused when built, as the API"]) + " |")
    for call in CALLS:
        cli = call.no_cli if call.cli is None else f"refused: `{call.cli}`"
        api = f"refused: `{call.api}`" + (" (Python's TypeError)" if call.error is TypeError else "")
        pyterrier = f"refused: `{call.pyterrier}`" if call.pyterrier is not None else call.no_frame
        lines.append(f"| {call.rule} | {cli} | {api} | refused: `{call.http}` (400, field "
                     f"`{call.field}`) | refused: the same line, a tool error | {pyterrier} |")
    for same in SAMES:
        lines.append(f"| {same.rule} | {same.cli} | {same.api} | {same.http} | {same.mcp} | {same.pyterrier} |")
    return "\n".join(lines).replace("{map}", "MAP").replace("{sim_map}", "MAP").replace("{abs_map}", "MAP").replace(
        "{run}", "RUN").replace("{corpus}", "CORPUS").replace("{corpus_unseen}", "CORPUS")


@pytest.fixture(scope="module")
def maps(tmp_path_factory) -> dict[str, str]:
    from acurank_cli.relevance import CalibrationMap

    folder = tmp_path_factory.mktemp("maps")
    paths = {}
    for name, backend in (("map", "minilm"), ("sim_map", "simulated")):
        paths[name] = str(folder / f"{name}.json")
        CalibrationMap(2, (0.0,) * 3, (1.0,) * 3, (0.8, 1.5, -0.3), -1.0,
                       {"k": 10, "init": "score", "backend": backend, "method": "acurank"}).save(paths[name])
    paths["abs_map"] = str(folder / "abs_map.json")  # fit with --absolute, for minilm (four features)
    CalibrationMap(2, (0.0,) * 4, (1.0,) * 4, (0.8, 1.5, -0.3, 2.0), -1.0,
                   {"k": 10, "init": "score", "backend": "minilm", "method": "acurank"}).save(paths["abs_map"])
    return paths


def _filled(values, maps: dict[str, str]):
    return [maps.get(v.strip("{}"), v) if isinstance(v, str) and v.startswith("{") else v for v in values]


@pytest.mark.parametrize("row", ROWS, ids=[r.rule for r in ROWS])
def test_every_entrance_refuses_in_the_same_line(row, maps, tmp_path):
    flags = [*_filled(row.flags, maps), *BACKEND.get(row.reranker, ())]
    ran = acurank("rerank", DL19 / "bm25.run", "--qids", "264014", "--reranker", row.reranker, "--topics",
                  DL19 / "topics.tsv", "--corpus", DL19 / "passages.jsonl.gz", *flags, "-o", tmp_path / "x.run",
                  check=False)
    assert (ran.returncode, ran.stderr.strip().splitlines()) == (2, [f"acurank: error: {row.cli}"]), ran.stderr
    assert not (tmp_path / "x.run").exists()

    from acurank_cli.api import Reranker
    from acurank_cli.errors import InputError

    keywords = {k: _filled([v], maps)[0] for k, v in row.keywords.items()}
    if row.reranker.startswith("openai:"):
        keywords["base_url"] = BACKEND[row.reranker][1]
    with pytest.raises(InputError) as refused:
        Reranker(row.reranker, **{"method": "acurank", **keywords})
    assert str(refused.value) == row.api
    from acurank_cli.integrations.pyterrier import AcuRankReranker  # PyTerrier's transformer: the API's words

    with pytest.raises(InputError) as refused:
        AcuRankReranker(row.reranker, **{"method": "acurank", **keywords})
    assert str(refused.value) == row.api

    for command in ("serve", "mcp"):
        started = subprocess.run([sys.executable, "-m", "acurank_cli", command, "--reranker", row.reranker, *flags,
                                  *(["--port", "0"] if command == "serve" else [])], capture_output=True, text=True,
                                 env=ENV, timeout=120, stdin=subprocess.DEVNULL)
        assert (started.returncode, started.stderr.strip().splitlines()) == (2, [f"acurank: error: {row.cli}"]), \
            (command, started.stderr)


def test_the_docs_show_the_parity_table():
    text = (Path(ROOT) / "docs" / "parity.md").read_text(encoding="utf-8")
    assert table() in text, "docs/parity.md: the table differs from tests/test_parity.py's ROWS:\n" + table()


def test_a_method_named_in_another_case_or_of_the_sessions_family_is_served_as_the_command_line_serves_it(maps):
    """Stop 103's trial: ``method="AcuRank"`` with a map fit with acurank was refused by the API and PyTerrier ("fit
    a map with AcuRank") and taken by the command line and the servers; a server's ``--method acurank-auto
    --beta-pool query`` refused a request for ``acurank-auto-9`` ("give --beta-pool query"), which the API serves.
    A name is now its family's spelling at every entrance, and a call naming the session's family takes the session's
    method options but those its name sets (the cap 9, -H's eps); another family takes none."""
    from acurank_cli.api import Reranker
    from acurank_cli.integrations.pyterrier import AcuRankReranker
    from acurank_cli.run.pipeline import Methods
    from acurank_cli.run.request import check_servable

    with Reranker("minilm", method="AcuRank", calibration=maps["map"], cache=None) as rr:
        assert rr.strategy.name == "acurank" and rr.calibration is not None
    AcuRankReranker("minilm", method="ACURANK", calibration=maps["map"], cache=None)
    auto = Methods("acurank-auto", {"beta_pool": "query"})
    nine = auto.for_call("ACURANK-AUTO-9")
    assert (nine.name, nine.parameters().cap, nine.parameters().beta_pool.value) == ("acurank-auto-9", 9, "query")
    check_servable(nine)  # its queries advance alone: served
    assert auto.for_call("AcuRank-Auto") is auto.strategy and auto.name == "acurank-auto"
    assert Methods("acurank-auto-9", {"beta_pool": "query"}).for_call("acurank-auto").parameters().beta_pool.value == "query"
    served = Methods("acurank", {"eps": 0.001})
    assert served.for_call("acurank-auto").parameters().eps == 1e-4  # another family: none of the session's options
    # a name's own parts win (stop 103's second trial: acurank-H took a server's --eps and was acurank): -H sets eps,
    # -HH eps and tau; acurank-9 sets neither, so it takes the server's eps
    assert [served.for_call(n).parameters().eps for n in ("acurank-9", "acurank-H", "ACURANK-HH-9")] == [0.001, 1e-4, 1e-4]
    assert Methods("acurank", {"tau": 7}).for_call("acurank-HH").parameters().tau == 5


@pytest.fixture(scope="module")
def per_call(tmp_path_factory) -> dict[str, str]:
    """What the per-call rows name: a map fit with a pivot, a pivot passage (and its file for the command line)."""
    from acurank_cli.relevance import CalibrationMap

    folder = tmp_path_factory.mktemp("pivots")
    CalibrationMap(2, (0.0,) * 5, (1.0,) * 5, (0.0, 0.0, -0.2, 1.0, 0.0), 0.0,
                   {"k": 10, "backend": "openai:gpt-4o-mini", "method": "acurank"}).save(folder / "pivoted.json")
    text = "a passage on the question's words that does not answer it"
    (folder / "pivots.tsv").write_text(f"264014\t{text}\n")
    (folder / "q.run").write_text("".join(f"q1 Q0 d{i} {i} {4 - i} bm25\n" for i in (1, 2, 3)))
    (folder / "topics.tsv").write_text("q1\thow long do fleas live\n")
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": t}) + "\n" for i, t in
                                                 ((1, "fleas live for weeks"), (2, " "), (3, "cats sleep a lot"))))
    (folder / "unseen.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": t}) + "\n" for i, t in
                                                 ((1, "fleas live for weeks"), (2, "\u200b\x00"), (3, "cats sleep a lot"))))
    return {"pivot_map": str(folder / "pivoted.json"), "pivots": str(folder / "pivots.tsv"), "text": text,
            "run": str(folder / "q.run"), "topics": str(folder / "topics.tsv"), "corpus": str(folder / "corpus.jsonl"),
            "corpus_unseen": str(folder / "unseen.jsonl")}


def test_every_entrance_refuses_a_call_in_the_same_line(per_call, tmp_path):
    """Issue 82: a call's rules (a pivot's: relevance.pivoted, check_pivot, Pivot.add_texts; an empty document's:
    Doc.blank; a query's instruction: Session.check_instruction) said once, asked by every entrance: the command line,
    the API's call, and each request of a running server, through HTTP and MCP."""
    import httpx

    sys.path.insert(0, str(ROOT / "tests" / "serve"))
    from test_serve import KEY, Server, mcp_rerank

    from acurank_cli.api import Reranker

    fill = lambda values: [per_call.get(v.strip("{}"), v) if isinstance(v, str) and v.startswith("{") else v  # noqa: E731
                           for v in values]
    fields = lambda d: dict(zip(d, fill(d.values())))  # noqa: E731
    said = lambda text: text.format(**per_call)  # noqa: E731
    docs = ["fleas live for weeks", "cats sleep a lot", "a flea's life cycle has four stages"]
    servers = {(c.reranker, c.server): None for c in CALLS}
    try:
        for reranker, flags in servers:
            servers[reranker, flags] = Server("--reranker", *reranker, "--no-cache", "--api-key", KEY, *fill(flags))
        for row in CALLS:
            if row.cli is not None:
                inputs = fill(row.inputs) if row.inputs else (DL19 / "bm25.run", "--qids", "264014", "--topics",
                                                              DL19 / "topics.tsv", "--corpus", DL19 / "passages.jsonl.gz")
                args = ("rerank", *inputs, "--reranker", *row.reranker, *fill(row.flags), "-o", tmp_path / "x.run")
                if "(see 'acurank " in row.cli:  # a usage error names the program: the console script a user types
                    ran = subprocess.run([str(Path(sys.executable).parent / "acurank"), *map(str, args)], env=ENV,
                                         capture_output=True, text=True, timeout=120)
                else:
                    ran = acurank(*args, check=False)
                assert (ran.returncode, ran.stderr.strip().splitlines()) == (2, [f"acurank: error: {said(row.cli)}"]), \
                    ran.stderr
            backend = dict(zip((o.lstrip("-").replace("-", "_") for o in row.reranker[1::2]), row.reranker[2::2]))
            call = fields(row.call)
            with pytest.raises(row.error) as refused:
                with Reranker(row.reranker[0], cache=None, **backend, **fields(row.keywords)) as rr:
                    rr.rerank("how long do fleas live", call.pop("documents", docs), **call)
            assert str(refused.value) == row.api
            if row.pyterrier is not None:  # a frame of the call's documents, through the transformer
                import pandas as pd

                from acurank_cli.integrations.pyterrier import AcuRankReranker

                texts = fill(row.call["documents"]) if "documents" in row.call else docs
                frame = pd.DataFrame({"qid": "q1", "query": "how long do fleas live", "text": texts,
                                      "docno": [f"d{i + 1}" for i in range(len(texts))]})
                with pytest.raises(row.error) as refused:  # the Reranker's settings: refused when built, or a call
                    AcuRankReranker(row.reranker[0], cache=None, **backend, **fields(row.keywords)).transform(frame)
                assert str(refused.value) == row.pyterrier
                if row.inputs and "--corpus" in row.inputs:  # the same documents looked up in the command line's corpus file
                    with pytest.raises(row.error) as refused:
                        AcuRankReranker(row.reranker[0], cache=None, corpus=per_call["corpus"], **backend).transform(
                            frame.drop(columns="text"))
                    assert str(refused.value) == row.pyterrier
            server = servers[row.reranker, row.server]
            body = {"query": "how long do fleas live", "documents": docs, **fields(row.fields)}
            reply = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, json=body,
                               timeout=60)
            assert (reply.status_code, reply.json()) == (400, {"message": row.http, "field": row.field}), reply.text
            result = mcp_rerank(server.url, KEY, body)
            assert (result.is_error, result.content[0].text) == (True, f"Error executing tool rerank: {row.http}")
    finally:
        for server in servers.values():
            if server is not None:
                assert server.stop() == 0, server.stderr


def test_the_run_rows_give_the_same_run_at_every_entrance(maps, tmp_path):
    """The run rows (SAMES). A map fit at k = 10 keeps k = 10 at every entrance, and top_k/top_n only cut the list:
    the command line's run scored by P(relevant) begins with the API's top_k=5 documents and values (the same
    documents and first-stage scores, the CLI's init); a server's top_n=5, through HTTP and MCP, gives the API's for
    the same texts without scores. The cut p:X keeps the same documents as --cut, min_p_relevant=X and cut="p:X"
    alike, and a request's cut the API's."""
    import gzip

    import httpx

    sys.path.insert(0, str(ROOT / "tests" / "serve"))
    from test_serve import KEY, Server, mcp_rerank

    from acurank_cli.api import Reranker

    qid, depth = "264014", 20
    out = tmp_path / "cli.run"
    acurank("rerank", DL19 / "bm25.run", "--qids", qid, "--depth", depth, "--drop-tail", "--reranker", "minilm",
            "--topics", DL19 / "topics.tsv", "--corpus", DL19 / "passages.jsonl.gz", "--calibration", maps["map"],
            "--score", "p_relevant", "--no-cache", "-o", out)
    cli = [(line.split()[2], float(line.split()[4])) for line in out.read_text().splitlines()]
    acurank("rerank", DL19 / "bm25.run", "--qids", qid, "--depth", depth, "--drop-tail", "--reranker", "minilm",
            "--topics", DL19 / "topics.tsv", "--corpus", DL19 / "passages.jsonl.gz", "--calibration", maps["map"],
            "--score", "p_relevant", "--cut", "p:0.3", "--no-cache", "-o", tmp_path / "cut.run")
    cli_cut = [(line.split()[2], float(line.split()[4])) for line in (tmp_path / "cut.run").read_text().splitlines()]
    topics = dict(line.split("\t", 1) for line in (DL19 / "topics.tsv").read_text().splitlines())
    with gzip.open(DL19 / "passages.jsonl.gz", "rt") as fh:
        texts = {r["_id"]: r["text"] for r in map(json.loads, fh)}
    head = [line.split() for line in (DL19 / "bm25.run").read_text().splitlines() if line.startswith(qid + " ")][:depth]
    docs = [{"id": d, "text": texts[d], "score": float(score)} for _, _, d, _, score, _ in head]
    with Reranker("minilm", method="acurank", cache=None, calibration=maps["map"], init="score") as rr:
        api = rr.rerank(topics[qid], docs, qid=qid, top_k=5)
        kept = [rr.rerank(topics[qid], docs, qid=qid, **how) for how in ({"min_p_relevant": 0.3}, {"cut": "p:0.3"})]
    with Reranker("minilm", method="acurank", cache=None, calibration=maps["map"]) as rr:  # a server's defaults
        plain = rr.rerank(topics[qid], [d["text"] for d in docs], top_k=5)  # what a server is sent: texts alone
        plain_cut = rr.rerank(topics[qid], [d["text"] for d in docs], cut="p:0.3")
    from acurank_cli.integrations.pyterrier import AcuRankReranker
    import pandas as pd

    frame = pd.DataFrame({"qid": qid, "query": topics[qid], "docno": [d["id"] for d in docs],
                          "text": [d["text"] for d in docs], "score": [d["score"] for d in docs]})
    terrier = (AcuRankReranker("minilm", "acurank", cache=None, calibration=maps["map"]) % 5).transform(frame)
    assert list(terrier["docno"]) == [d.id for d in api]
    assert list(terrier["p_relevant"]) == pytest.approx([d.p_relevant for d in api])
    assert (len(cli), len(api), api.k, plain.k) == (depth, 5, 10, 10)
    assert [d for d, _ in cli[:5]] == [d.id for d in api]
    assert [p for _, p in cli[:5]] == pytest.approx([d.p_relevant for d in api], abs=1e-5)  # the run's printed digits
    assert 0 < len(cli_cut) < depth and all(p >= 0.3 for _, p in cli_cut)  # the cut keeps some and drops some
    for out_ in kept:
        assert [d.id for d in out_] == [d for d, _ in cli_cut]
        assert [d.p_relevant for d in out_] == pytest.approx([p for _, p in cli_cut], abs=1e-5)
    server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY, "--calibration", maps["map"])
    try:
        body = {"query": topics[qid], "documents": [d["text"] for d in docs], "top_n": 5}
        got = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, json=body,
                         timeout=120).json()
        assert [r["index"] for r in got["results"]] == [int(d.id) for d in plain]
        assert [r["relevance_score"] for r in got["results"]] == pytest.approx([d.p_relevant for d in plain])
        assert (got["meta"]["acurank"]["k"], got["meta"]["acurank"]["relevance_score"]) == (10, "p_relevant")
        answered = mcp_rerank(server.url, KEY, body)
        assert json.loads(answered.content[0].text)["results"] == got["results"]
        body = {"query": topics[qid], "documents": [d["text"] for d in docs], "cut": "p:0.3"}
        got = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, json=body,
                         timeout=120).json()
        assert [r["index"] for r in got["results"]] == [int(d.id) for d in plain_cut] and got["results"]
        assert [r["relevance_score"] for r in got["results"]] == pytest.approx([d.p_relevant for d in plain_cut])
        assert got["meta"]["acurank"]["cut"] == "p:0.3"
        assert json.loads(mcp_rerank(server.url, KEY, body).content[0].text)["results"] == got["results"]
    finally:
        assert server.stop() == 0, server.stderr


def test_a_documents_own_id_and_score_are_taken_alike_at_every_entrance(tmp_path):
    """Held-out entrance cases (stop 99): a server took a document object's ``score`` and ``id`` as metadata, where
    the API takes them as the document's first-stage score and id; and a top_n beyond the documents set k at the
    server to their number and at the API to top_n. Both are now the API's rule: the same order and p_topk from
    DL19 documents given with their BM25 scores reversed (so that the scores, not the input order, decide the first
    stage), and the same k for a top_n of 50 on 20 documents."""
    import gzip

    import httpx

    sys.path.insert(0, str(ROOT / "tests" / "serve"))
    from test_serve import KEY, Server, mcp_rerank

    from acurank_cli.api import Reranker

    qid, depth = "264014", 20
    topics = dict(line.split("\t", 1) for line in (DL19 / "topics.tsv").read_text().splitlines())
    with gzip.open(DL19 / "passages.jsonl.gz", "rt") as fh:
        texts = {r["_id"]: r["text"] for r in map(json.loads, fh)}
    head = [line.split() for line in (DL19 / "bm25.run").read_text().splitlines() if line.startswith(qid + " ")][:depth]
    docs = [{"id": d, "text": texts[d], "score": float(score)} for _, _, d, _, score, _ in reversed(head)]
    position = {d["id"]: i for i, d in enumerate(docs)}
    with Reranker("minilm", method="acurank", cache=None) as rr:
        api = rr.rerank(topics[qid], docs, top_k=5)
        wide = rr.rerank(topics[qid], docs, top_k=50)
        unscored = rr.rerank(topics[qid], [d["text"] for d in docs], top_k=5)
    # the scores decide the first stage, not the input order: other ratings (p_topk), each document's BM25 score
    assert [d.p_topk for d in api] != pytest.approx([d.p_topk for d in unscored])
    assert all(d.first_stage_score == docs[position[d.id]]["score"] for d in api)
    server = Server("--reranker", "minilm", "--no-cache", "--api-key", KEY)
    try:
        for top_n, out in ((5, api), (50, wide)):
            body = {"query": topics[qid], "documents": docs, "top_n": top_n}
            got = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, json=body,
                             timeout=120).json()
            assert [r["index"] for r in got["results"]] == [position[d.id] for d in out], got
            assert [r["relevance_score"] for r in got["results"]] == pytest.approx([d.p_topk for d in out])
            assert got["meta"]["acurank"]["k"] == out.k == min(top_n, depth)
            assert json.loads(mcp_rerank(server.url, KEY, body).content[0].text)["results"] == got["results"]
        twice = [{"id": "a", "text": "fleas live for weeks"}, {"id": "a", "text": "cats sleep a lot"}]
        reply = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                           json={"query": "how long do fleas live", "documents": twice})
        assert reply.status_code == 400 and reply.json()["field"] == "documents", reply.text
        assert reply.json()["message"] == ("documents: document id 'a' is given twice (documents 0 and 1): ids must be "
                                           "unique within a query"), reply.text  # was "query the request: ..."
        import pandas as pd

        from acurank_cli.errors import InputError
        from acurank_cli.integrations.pyterrier import AcuRankReranker

        frame = pd.DataFrame({"qid": "q1", "query": "how long do fleas live", "docno": ["d1", "d2"],
                              "text": ["fleas live for weeks", "cats sleep a lot"], "score": ["high", 1]})
        with pytest.raises(InputError, match=r"^query q1, docno d1: column 'score' 'high' is not a number$"):
            AcuRankReranker("minilm", cache=None).transform(frame)
    finally:
        assert server.stop() == 0, server.stderr


class Reverse(RerankerBase):
    """The plug-in below, as an instance the API is given: each window answered reversed, no text read."""

    name, needs_texts = "reverse", False

    def rerank_batch(self, requests):
        return [RerankResult(order=tuple(reversed(range(len(r.docids))))) for r in requests]


REVERSE = """
from acurank_cli import RerankerBase, RerankResult, register


@register("reverse", takes_arg=False, help="answers every window in reverse presented order", needs_texts=False)
class Reverse(RerankerBase):
    name = "reverse"

    def rerank_batch(self, requests):
        return [RerankResult(order=tuple(reversed(range(len(r.docids))))) for r in requests]
"""


def test_an_empty_document_is_ranked_where_the_reranker_reads_no_texts(per_call, tmp_path):
    """The run row of an empty document (records.Doc.blank): a reranker that reads no texts ranks it at every
    entrance. A plug-in that answers each window reversed, on q1's three documents (d2's text is a blank): one window
    in first-stage order d1 d2 d3, so d3 d2 d1 by hand, from the command line, the API, HTTP and MCP alike. The
    simulated reranker (it reads no texts either, but orders by qrels) is refused at serve's and mcp's start."""
    import os

    import httpx

    sys.path.insert(0, str(ROOT / "tests" / "serve"))
    from test_serve import KEY, Server, mcp_rerank

    from acurank_cli.api import Reranker

    (tmp_path / "reverse_backend.py").write_text(REVERSE)
    env = {**ENV, "ACURANK_BACKENDS": "reverse_backend",
           "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), ENV.get("PYTHONPATH")) if p)}
    out = tmp_path / "cli.run"
    ran = subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", per_call["run"], "--method", "sw-1",
                          "--reranker", "reverse", "--topics", per_call["topics"], "--corpus", per_call["corpus"],
                          "--no-cache", "-o", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert [line.split()[2] for line in out.read_text().splitlines()] == ["d3", "d2", "d1"]

    texts = ["fleas live for weeks", " ", "cats sleep a lot"]
    docs = [{"id": f"d{i + 1}", "text": t, "score": float(3 - i)} for i, t in enumerate(texts)]
    reverse = Reverse()  # the plug-in's class, not registered in this process
    with Reranker(reverse, method="sw-1", cache=None) as rr:
        assert [d.id for d in rr.rerank("how long do fleas live", docs)] == ["d3", "d2", "d1"]
        import pandas as pd

        from acurank_cli.integrations.pyterrier import AcuRankReranker

        frame = pd.DataFrame({"qid": "q1", "query": "how long do fleas live", "docno": [d["id"] for d in docs],
                              "text": texts, "score": [d["score"] for d in docs]})
        assert list(AcuRankReranker(rr).transform(frame)["docno"]) == ["d3", "d2", "d1"]
    server = Server("--reranker", "reverse", "--method", "sw-1", "--no-cache", "--api-key", KEY, env=env)
    try:
        body = {"query": "how long do fleas live", "documents": texts}
        got = httpx.post(server.url + "/v2/rerank", headers={"Authorization": f"Bearer {KEY}"}, json=body,
                         timeout=60)
        assert got.status_code == 200, got.text
        assert [r["index"] for r in got.json()["results"]] == [2, 1, 0]
        assert json.loads(mcp_rerank(server.url, KEY, body).content[0].text)["results"] == got.json()["results"]
    finally:
        assert server.stop() == 0, server.stderr
    for command in ("serve", "mcp"):
        started = subprocess.run([sys.executable, "-m", "acurank_cli", command, "--reranker", "simulated",
                                  *(["--port", "0"] if command == "serve" else [])], capture_output=True, text=True,
                                 env=ENV, timeout=120, stdin=subprocess.DEVNULL)
        assert (started.returncode, started.stderr.strip().splitlines()) == (2, [
            "acurank: error: --reranker simulated: it orders windows by qrels, and a served request's documents are "
            "in none: serve a reranker that reads the documents' texts"]), (command, started.stderr)
