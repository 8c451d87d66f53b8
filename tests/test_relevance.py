"""P(relevant), P(none), the cut rules and the calibration measures (the acurank_cli.relevance package; the measures
in acurank_cli/evaluation.py), each against values worked by hand from the definitions in docs/relevance.md."""

from __future__ import annotations

import json
import math
import random
import re

import pytest

from acurank_cli.errors import InputError
from acurank_cli.io.line_records import stats_line, stats_record
from acurank_cli.records import DocRating, RelevanceSummary, StatsRecord
from acurank_cli.relevance import (FEATURES, FORMAT, CalibrationMap, Cut, brier, calibration_error, expected_f1_cut,
                                   f1_at, features, fit, options, oracle_f1, p_none)


def rating(mu: float, p: float | None, rank: int) -> DocRating:
    return DocRating(docid=f"d{rank}", mu=mu, sigma=1.0, s=0.5, rank=rank, p_topk=p)


def test_features_by_hand():
    xs = features([rating(3.0, 1.0, 1), rating(2.0, 0.5, 2), rating(1.0, 0.0, 3)])
    big = math.log((1 - 1e-6) / 1e-6)  # p_topk 1 and 0 are clipped to 1 - 1e-6 and 1e-6
    sd = math.sqrt(2 / 3)  # population sd of 3, 2, 1
    expected = [(big, 1 / sd, 0.0), (0.0, 0.0, math.log(2)), (-big, -1 / sd, math.log(3))]
    for got, want in zip(xs, expected):
        assert got == pytest.approx(want, abs=1e-9)
    assert features([rating(5.0, 0.3, 1)])[0][1] == 0.0  # one document: z_mu 0, not a division by zero


def test_a_map_is_a_logistic_over_standardised_features():
    m = CalibrationMap(2, (0.0, 1.0, 0.0), (1.0, 2.0, 1.0), (1.0, 0.0, 0.0), 0.0)
    # coef only on logit(p_topk), centre 0, scale 1: the map gives p_topk back
    two = [rating(1.0, 0.3, 1), rating(0.0, 0.8, 2)]
    assert m.of_matrix(features(two)).tolist() == pytest.approx([0.3, 0.8])
    # ... and P(relevant) never rises down the ranking: the violating pair pooled to its mean
    assert m.probabilities(two) == pytest.approx([0.55, 0.55])
    m2 = CalibrationMap(2, (0.0, 0.0, 0.0), (1.0, 1.0, 2.0), (0.0, 0.0, -1.0), 0.5)
    # sigmoid(0.5 - log(rank) / 2)
    got = m2.probabilities([rating(1.0, 0.5, 1), rating(0.0, 0.5, 4)])
    assert got == pytest.approx([1 / (1 + math.exp(-0.5)), 1 / (1 + math.exp(-(0.5 - math.log(4) / 2)))])


def test_p_relevant_is_monotone_down_the_ranking_by_hand():
    """Issue 83: opposite signs on z(mu) and log(rank) (as a DL19 fit gave) let a lower rank read as more probable.
    Pool adjacent violators in rank order, by hand: 0.2, 0.6, 0.1, 0.5, 0.4 (ranks 1..5) -> (0.2, 0.6) pool to 0.4,
    then (0.1, 0.5, 0.4): 0.1 < 0.5 pools (0.1, 0.5) to 0.3 < 0.4, pooled to 1/3 each: 0.4, 0.4, 1/3, 1/3, 1/3.
    The mean (the expected count of relevant documents) is kept; ratings given out of rank order are put back."""
    from acurank_cli.relevance import monotone

    got = monotone([0.2, 0.6, 0.1, 0.5, 0.4], [1, 2, 3, 4, 5])
    assert got.tolist() == pytest.approx([0.4, 0.4, 1 / 3, 1 / 3, 1 / 3])
    assert sum(got) == pytest.approx(1.8)
    shuffled = monotone([0.5, 0.2, 0.4, 0.6, 0.1], [4, 1, 5, 2, 3])  # the same documents, listed in another order
    assert shuffled.tolist() == pytest.approx([1 / 3, 0.4, 1 / 3, 0.4, 1 / 3])
    assert monotone([0.9, 0.5, 0.1], [1, 2, 3]).tolist() == [0.9, 0.5, 0.1]  # already monotone: unchanged


def test_fit_recovers_a_known_logistic_and_matches_the_base_rate():
    rng = random.Random(7)
    true = (1.5, -0.8, 0.0)
    rows, labels = [], []
    for _ in range(6000):
        x = (rng.gauss(0, 1), rng.gauss(0, 1), rng.gauss(0, 1))
        z = -0.5 + sum(a * b for a, b in zip(true, x))
        rows.append(x)
        labels.append(int(rng.random() < 1 / (1 + math.exp(-z))))
    m = fit(rows, labels, 2, {"queries": 1})
    # coefficients are on standardised columns: multiply back by the scale
    raw = [c / s for c, s in zip(m.coef, m.scale)]
    assert raw == pytest.approx(true, abs=0.12)
    # the likelihood's stationarity: on its training rows a logistic fit's mean probability is the share relevant
    from acurank_cli.relevance import _sigmoid

    probs = [_sigmoid(m.intercept + sum(c * (v - mu) / s for c, v, mu, s in zip(m.coef, x, m.center, m.scale)))
             for x in rows]
    assert sum(probs) / len(probs) == pytest.approx(sum(labels) / len(labels), abs=1e-4)
    assert m.fit == {"documents": 6000, "relevant": sum(labels), "queries": 1}


def test_fit_needs_both_kinds_of_documents():
    with pytest.raises(InputError, match="0 relevant"):
        fit([(0.0, 0.0, 0.0)] * 3, [0, 0, 0], 2)


def test_a_fit_records_what_it_was_fit_on_with_no_secret_in_it():
    """The map's record is redacted where the map is fit (whoever fits it: the CLI's --calibrate, a script): a URL's
    user and password and a secret-looking query value are masked; names and numbers are kept as given."""
    about = {"backend": "openai:gpt-4@https://bob:hunter2@api.example.com/v1?api_key=sk-live-abc",
             "method": "acurank", "k": 10, "qids": ["q1", "q2"]}
    m = fit([(0.0, 1.0, 0.0), (1.0, 0.0, 1.0), (0.5, 0.5, 0.5), (0.9, 0.1, 0.8)], [0, 1, 0, 1], 2, about)
    said = json.dumps(m.to_json())
    assert "hunter2" not in said and "sk-live-abc" not in said and "bob" not in said
    assert m.fit["backend"].startswith("openai:gpt-4@https://") and "api.example.com/v1" in m.fit["backend"]
    assert m.fit["method"] == "acurank" and m.fit["k"] == 10 and m.fit["qids"] == ["q1", "q2"]
    assert m.fit["documents"] == 4 and m.fit["relevant"] == 2


def test_p_none_is_the_product_of_the_complements():
    assert p_none([0.5, 0.2, 0.0]) == pytest.approx(0.5 * 0.8)
    assert p_none([]) == 1.0
    assert p_none([1.0]) < 1e-14  # clipped, not log(0)


def test_one_judgement_composes_p_relevant_p_none_and_the_cuts_by_hand():
    """rules.judge, the one place a map's answer is composed (the run's judged and a request's output_of): the map
    gives p_topk back (coef on logit(p_topk) only), 0.9, 0.7, 0.35, 0.2 down ranks 1-4. P(none) = 0.1 * 0.3 * 0.65 *
    0.8 = 0.0156. The cut p:0.3 keeps positions 0-2; f1 then applied to what it kept (0.9, 0.7, 0.35; S = 1.95):
    K=1 1.8/2.95 = 0.610, K=2 3.2/3.95 = 0.810, K=3 3.9/4.95 = 0.788 > P(none) 0.0195: positions 0 and 1. The
    cut p:0.75 after f1 keeps position 0 alone."""
    from acurank_cli.relevance import judge, judged, Relevance

    m = CalibrationMap(2, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (1.0, 0.0, 0.0), 0.0)
    rated = [rating(4.0 - i, p, i + 1) for i, p in enumerate([0.9, 0.7, 0.35, 0.2])]
    got = judge(m, rated)
    assert got.p == pytest.approx((0.9, 0.7, 0.35, 0.2)) and got.kept == (0, 1, 2, 3)
    assert got.p_none == pytest.approx(0.1 * 0.3 * 0.65 * 0.8)
    assert judge(m, rated, cuts=[Cut("p", 0.3)]).kept == (0, 1, 2)
    assert judge(m, rated, cuts=[Cut("p", 0.3), Cut("f1")]).kept == (0, 1)
    assert judge(m, rated, cuts=[Cut("f1"), Cut("p", 0.75)]).kept == (0,)
    assert judge(m, rated, cuts=[Cut("p", 0.95)]).kept == ()
    # the second cut sees only what the first kept: 0.9, 0.35, then six at 0.25. Over the whole list (S = 2.75) f1
    # keeps two (K=1 1.8/3.75 = 0.480, K=2 2.5/4.75 = 0.526, K=3 3.0/5.75 = 0.522); after p:0.3 (0.9, 0.35; S =
    # 1.25) it keeps one (K=1 1.8/2.25 = 0.800, K=2 2.5/3.25 = 0.769)
    tail = [rating(9.0 - i, p, i + 1) for i, p in enumerate([0.9, 0.35] + [0.25] * 6)]
    assert judge(m, tail, cuts=[Cut("f1")]).kept == (0, 1)
    assert judge(m, tail, cuts=[Cut("p", 0.3), Cut("f1")]).kept == (0,)
    # the run's form: the same P(relevant), the cut's documents, how many were kept
    from acurank_cli.records import Ranked

    ranking = [Ranked(r.docid, r.mu) for r in rated]
    out, summary = judged(Relevance(m, Cut("p", 0.3)), ranking, {r.docid: r for r in rated})
    assert [r.docid for r in out] == ["d1", "d2", "d3"] and summary.kept == 3
    assert summary.p == pytest.approx({"d1": 0.9, "d2": 0.7, "d3": 0.35, "d4": 0.2})
    assert summary.p_none == pytest.approx(got.p_none)


def test_expected_f1_cut_by_hand():
    # S = 1.8; K=1: 1.8/2.8 = 0.643, K=2: 3.4/3.8 = 0.895, K=3: 3.6/4.8 = 0.75; P(none) = 0.1*0.2*0.9 = 0.018
    assert expected_f1_cut([0.1, 0.9, 0.8]) == 2
    # S = 0.1; K=1: 0.1/1.1 = 0.091, K=2: 0.2/2.1 = 0.095; P(none) = 0.9025: nothing here
    assert expected_f1_cut([0.05, 0.05]) == 0
    # one sure document: K=1: 2/2 = 1
    assert expected_f1_cut([1.0, 0.0, 0.0]) == 1
    assert expected_f1_cut([]) == 0


def test_cut_rules_parse_and_keep():
    assert Cut.parse("f1") == Cut("f1") and str(Cut.parse(" F1 ")) == "f1"
    c = Cut.parse("p:0.5")
    assert c == Cut("p", 0.5) and str(c) == "p:0.5"
    assert c.keep([0.2, 0.5, 0.9, 0.49]) == {1, 2}
    assert Cut("f1").keep([0.1, 0.9, 0.8]) == 2
    for bad in ("p:1.5", "p:x", "top5", "p:", "p:-0.1"):
        with pytest.raises(InputError, match="--cut"):
            Cut.parse(bad)


def test_f1_and_the_oracle_cut_by_hand():
    labels = [1, 0, 1, 0]  # 2 relevant: k=1 2/3, k=2 2/4, k=3 4/5, k=4 4/6
    assert [f1_at(labels, k) for k in range(5)] == pytest.approx([0.0, 2 / 3, 0.5, 0.8, 2 / 3])
    assert oracle_f1(labels) == pytest.approx(0.8)
    assert oracle_f1([0, 0]) == 1.0 and f1_at([0, 0], 1) == 0.0  # nothing relevant: only the empty cut is right


def test_calibration_error_and_brier_by_hand():
    p, y = [0.05, 0.15, 0.95, 0.95], [0, 1, 1, 0]
    ece, table = calibration_error(p, y, 10)
    # bin 0: |0.05 - 0|, bin 1: |0.15 - 1|, bin 9: 2 x |0.95 - 0.5|
    assert ece == pytest.approx((0.05 + 0.85 + 0.9) / 4)
    assert [(b["lo"], b["documents"]) for b in table] == [(0.0, 1), (0.1, 1), (0.9, 2)]
    assert calibration_error([1.0], [1], 10)[1][0]["lo"] == 0.9  # 1.0 falls in the last bin
    assert brier(p, y) == pytest.approx((0.05 ** 2 + 0.85 ** 2 + 0.05 ** 2 + 0.95 ** 2) / 4)


def test_map_files_round_trip_and_faults_are_one_line(tmp_path):
    m = CalibrationMap(2, (1.0, 0.0, 2.0), (2.0, 1.0, 0.5), (0.3, 1.2, -0.4), -1.0, {"queries": 43})
    path = tmp_path / "map.json"
    m.save(path)
    assert CalibrationMap.load(path) == m
    rec = json.loads(path.read_text())
    assert rec["format"] == FORMAT and rec["features"] == list(FEATURES)
    cases = {
        "missing.json": None,
        "notjson.json": "{",
        "format.json": json.dumps({**rec, "format": "other"}),
        "features.json": json.dumps({**rec, "features": ["p_topk"]}),
        "short.json": json.dumps({**rec, "coef": [1.0]}),
        "scale.json": json.dumps({**rec, "scale": [1.0, 0.0, 1.0]}),
        "nan.json": json.dumps({**rec, "intercept": float("nan")}),
        "keys.json": json.dumps({k: v for k, v in rec.items() if k != "grade"}),
        "grade.json": json.dumps({**rec, "grade": 0}),  # P(grade >= 0) is 1 for every document
    }
    for name, text in cases.items():
        bad = tmp_path / name
        if text is not None:
            bad.write_text(text)
        with pytest.raises(InputError) as info:
            CalibrationMap.load(bad)
        assert str(info.value).startswith(f"{bad}: --calibration") and "\n" not in str(info.value), name


def test_the_flags_are_checked_together(tmp_path):
    m = CalibrationMap(2, (0.0,) * 3, (1.0,) * 3, (1.0, 0.0, 0.0), 0.0)
    m.save(tmp_path / "m.json")
    assert options(None) == (None, None)
    rel, fitted = options(str(tmp_path / "m.json"), cut="f1", score="p_relevant")
    assert fitted is None and rel.cut is None and rel.score and rel.calibration == m  # the cut is settle's (below)
    rel, fitted = options("out.json", calibrate="q.txt", grade=2)
    assert rel is None and (fitted.qrels, fitted.grade, fitted.output) == ("q.txt", 2, "out.json")
    assert options("out.json", calibrate="q.txt")[1].grade == 1
    for kwargs, said in [({"calibration": None, "score": "p_relevant"}, "--score p_relevant needs --calibration"),
                         ({"calibration": None, "calibrate": "q"}, "--calibrate needs --calibration"),
                         ({"calibration": "m", "grade": 2}, "--relevant-grade is the grade --calibrate fits"),
                         ({"calibration": "m", "calibrate": "q", "cut": "f1"}, "cannot also cut"),
                         ({"calibration": "m", "score": "rank"}, "--score 'rank'")]:
        with pytest.raises(InputError, match=said):
            options(**kwargs)
    from acurank_cli.run.pipeline import Methods, ScoreSource
    from acurank_cli.relevance import SAID
    from acurank_cli.run.request import Asked, settle

    run_file = Methods(None, source=ScoreSource.run_file)  # the run's cut: the rules every entrance's call meets
    with pytest.raises(InputError, match="^--cut needs --calibration MAP.json"):
        settle(run_file, Asked(cut="f1"), SAID["cli"])
    settled = settle(Methods(None, source=ScoreSource.run_file, calibration=m), Asked(cut="f1"), SAID["cli"])
    assert settled.cuts == (Cut("f1"),) and settled.strategy.name == "acurank"


def test_the_stats_line_holds_p_relevant_and_reads_back():
    summary = RelevanceSummary(grade=2, p_none=0.012345678, p={"a": 0.91234567, "b": 0.1}, kept=1)
    rec = StatsRecord(qid="q", method="acurank", calls=5, relevance=summary)
    line = stats_line(rec)
    assert line["relevance"] == {"grade": 2, "p_none": 0.0123457, "kept": 1, "p": {"a": 0.912346, "b": 0.1}}
    back = stats_record(json.loads(json.dumps(line))).relevance
    assert back.kept == 1 and back.p == {"a": 0.912346, "b": 0.1} and list(back.p) == ["a", "b"]
    assert "relevance" not in stats_line(StatsRecord(qid="q", method="acurank", calls=5))


def test_a_maps_huge_coefficients_give_0_or_1_without_a_warning_and_inf_minus_inf_is_refused():
    """sigmoid(z) at z = +-inf (a map's coefficients of 1e308 overflow the sum): 1 and 0, with no numpy warning on
    stderr; where +inf and -inf meet in one sum (NaN) there is no probability: one line."""
    import warnings

    m = CalibrationMap(1, (0.0,) * 3, (1.0,) * 3, (1e308,) * 3, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        assert m.of_matrix([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]]).tolist() == [1.0, 0.0]
        with pytest.raises(InputError, match="^calibration: the map's coefficients overflow"):
            CalibrationMap(1, (0.0,) * 3, (1.0,) * 3, (1.0, -1.0, 0.0), 0.0).of_matrix([[math.inf, math.inf, 0.0]])


def test_a_map_is_fittable_is_checked_before_any_call_by_hand():
    """check_fittable counts the judged queries' candidates as the fit labels them (an unjudged candidate of a judged
    query is not relevant; an unjudged query is left out)."""
    from acurank_cli.records import Candidate, RankingTask
    from acurank_cli.relevance import check_fittable

    tasks = [RankingTask("a", "qa", (Candidate("d1", 3.0), Candidate("d2", 2.0))),
             RankingTask("b", "qb", (Candidate("d3", 1.0),))]
    check_fittable({"a": {"d1": 2}}, tasks, 2, "Q")  # d1 relevant, d2 unjudged: other
    with pytest.raises(InputError, match=r"^--calibrate: the judged queries' candidates hold 0 relevant \(grade >= 3\) "
                                         r"and 2 other documents; a map needs both$"):
        check_fittable({"a": {"d1": 2}}, tasks, 3, "Q")
    with pytest.raises(InputError, match=r"^--calibrate: the judged queries' candidates hold 1 relevant \(grade >= 1\) "
                                         r"and 0 other documents"):
        check_fittable({"b": {"d3": 1}}, tasks, 1, "Q")
    with pytest.raises(InputError, match="^--calibrate Q: it judges none of this run's queries"):
        check_fittable({"c": {"d1": 2}}, tasks, 1, "Q")


@pytest.mark.parametrize("options", [{"k": "10"}, {"k": 10.0}, {"k": 10.5}, {"k": "abc"}, {"k": True}, {"k": 0},
                                     {"init": "SCORE"}, {"init": "bogus"}, {"init": 1}])
def test_a_map_refuses_a_methods_option_out_of_its_domain_as_without_one(options):
    """Held-out case (stop 106): with a map, k = "10", 10.0 and 10.5 were taken as 10, "abc" raised a bare ValueError,
    True and 0 were blamed on the map ("this k is 1: give k = 10"), init "bogus" too: the option's own domain is
    said first, as without a map, then the map's k and init."""
    from acurank_cli.params import ParameterError
    from acurank_cli.run.pipeline import Methods

    m = CalibrationMap(1, (0.0,) * 3, (1.0,) * 3, (1.0, 0.0, 0.0), 0.0, {"k": 10, "init": "score"})
    with pytest.raises(ParameterError) as alone:
        Methods("acurank", options)
    with pytest.raises(ParameterError) as mapped:
        Methods("acurank", options, calibration=m)
    assert str(mapped.value) == str(alone.value) and "must be" in str(alone.value)
    assert Methods("acurank", {}, calibration=m).strategy.cutoff == 10  # valid: the map's k kept
    with pytest.raises(InputError, match="^calibration: the map was fit on p_topk at k = 10 and this k is 5"):
        Methods("acurank", {"k": 5}, calibration=m)


@pytest.mark.parametrize("fit, said", [({"k": "ten"}, "the map's fit.k is 'ten'"), ({"k": 0}, "the map's fit.k is 0"),
                                       ({"k": 10.7}, "the map's fit.k is 10.7"), ({"k": True}, "the map's fit.k is True"),
                                       ({"init": "bogus"}, "the map's fit.init is 'bogus'"), ([1], 'a calibration map\'s "fit" must be an object'),
                                       ({"signals": "oops"}, "the map's fit.signals is 'oops'"),
                                       ({"signals": {"top": ["a"]}}, "the map's fit.signals.top must be a list of finite"),
                                       ({"qids": "23849"}, "the map's fit.qids is '23849'"),
                                       ({"method": 42}, "the map's fit.method is 42")])
def test_a_maps_fit_is_checked_when_it_is_read(fit, said):
    """An edited map's k or init is its own fault, named with the map (it crashed, or was blamed on --k or --init)."""
    rec = CalibrationMap(1, (0.0,) * 3, (1.0,) * 3, (1.0, 0.0, 0.0), 0.0, {}).to_json()
    rec["fit"] = fit
    with pytest.raises(InputError, match=f"^m.json: --calibration: {re.escape(said)}"):
        CalibrationMap.of(rec, "m.json", "--calibration")
    rec["fit"] = {"k": 10, "init": "zscore"}
    assert CalibrationMap.of(rec).fit == {"k": 10, "init": "zscore"}
