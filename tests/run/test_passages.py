"""Long documents by their passages (run/passages.py): the spans, the order the method sees them in, the aggregation
back to documents, the records written, and the refusals. Expected values are worked out by hand from the rules in
the module doc (a passage of WORDS words every STRIDE words, the last ending at the text's end; passages in rounds;
MaxP, FirstP, sum, soft-max)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from acurank_cli.errors import InputError
from acurank_cli.io.line_records import stats_line, stats_record
from acurank_cli.params import ParameterError
from acurank_cli.records import (CallTally, Candidate, Doc, DocRating, PassageSpan, QueryOutcome, Ranked, RankingTask,
                                 RatingsSnapshot, StatsRecord)
from acurank_cli.method.choices import Init
from acurank_cli.method.registry import build_strategy
from acurank_cli.method.trueskill import task_priors
from acurank_cli.run.passages import Aggregate, Passages, split
from scripted import drive


def words(n: int) -> str:
    """w0 w1 ... w(n-1), one space apart: w0..w9 are 2 characters (word i of those starts at 3i)."""
    return " ".join(f"w{i}" for i in range(n))


def spans(text: str, spec: Passages) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in spec.spans(text)[0]]


def test_a_passage_every_stride_words_and_the_last_ends_the_text():
    four_by_two = Passages(4, 2)
    # 10 words: starts 0, 2, 4 (while a passage would not reach the end), then 10 - 4 = 6
    assert spans(words(10), four_by_two) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    # 11 words by 4:3: starts 0, 3, 6, then 11 - 4 = 7
    assert spans(words(11), Passages(4, 3)) == [(0, 4), (3, 7), (6, 10), (7, 11)]
    # exactly WORDS words: whole; one more: two passages, the second one word on
    assert spans(words(4), four_by_two) == []
    assert spans(words(5), four_by_two) == [(0, 4), (1, 5)]
    # character spans: word i starts at 3i, ends at 3i + 2
    third = four_by_two.spans(words(10))[0][1]
    assert third == PassageSpan(1, 2, 6, 6, 17)
    assert words(10)[third.char_start: third.char_end] == "w2 w3 w4 w5"


def test_runs_of_spaces_and_one_word_and_scripts_without_spaces():
    spec = Passages(2, 2)
    assert spec.spans("a")[0] == ()
    assert spec.spans("")[0] == ()
    text = "a   b\n\tc"
    got = spec.spans(text)[0]
    assert [(s.start, s.end) for s in got] == [(0, 2), (1, 3)]
    assert [text[s.char_start: s.char_end] for s in got] == ["a   b", "b\n\tc"]
    # each character of a script written without spaces is one word; other runs of letters stay one word
    cjk = "一二三四五"
    assert [cjk[s.char_start: s.char_end] for s in spec.spans(cjk)[0]] == ["一二", "三四", "四五"]
    mixed = "ab 一二 cd"  # ab, 一, 二, cd
    assert [mixed[s.char_start: s.char_end] for s in spec.spans(mixed)[0]] == ["ab 一", "二 cd"]


def test_the_cap_keeps_the_first_passages_and_firstp_makes_one():
    text = words(100)
    got, capped = Passages(10, 5, max_per_doc=3).spans(text)
    assert [(s.start, s.end) for s in got] == [(0, 10), (5, 15), (10, 20)] and capped
    got, capped = Passages(10, 5, Aggregate.firstp).spans(text)
    assert [(s.start, s.end) for s in got] == [(0, 10)] and capped
    got, capped = Passages(50, 25).spans(text)  # 0, 25, then 50: three, under the cap of 10
    assert [(s.start, s.end) for s in got] == [(0, 50), (25, 75), (50, 100)] and not capped


def test_the_flag_text_and_its_refusals():
    assert Passages.parse("150") == Passages(150, 75)
    assert Passages.parse(" 128:64 ") == Passages(128, 64)
    assert Passages.parse("1") == Passages(1, 1)
    assert Passages.parse("10:10", "sum", 4) == Passages(10, 10, Aggregate.sum, 4)
    assert Passages.of(None) is None
    for bad in ("0", "10:0", "10:11", "abc", "10:5:3", "-5", "1.5"):
        with pytest.raises(ParameterError) as caught:
            Passages.parse(bad)
        assert caught.value.cli().startswith("--passages ")
    with pytest.raises(ParameterError) as caught:
        Passages.parse("10", "max")
    assert caught.value.cli().startswith("--passage-score max: must be one of maxp, firstp, sum, softmax")
    with pytest.raises(ParameterError) as caught:
        Passages.parse("10", None, 0)
    assert caught.value.cli().startswith("--max-passages 0")
    for given in ({"passage_score": "maxp"}, {"max_passages": 3}):
        with pytest.raises(ParameterError, match="only with passages"):
            Passages.of(None, **given)


def task_of(*docs: tuple[str, float]) -> RankingTask:
    return RankingTask("q1", "query", tuple(Candidate(d, s) for d, s in docs))


TEXTS = {"A": Doc("A", words(8), "title A"), "B": Doc("B", words(3)), "C": Doc("C", words(6))}


def test_passages_go_to_the_method_round_by_round_with_their_documents_scores():
    # A: 8 words by 4:2 -> starts 0, 2, then 4 (= 8 - 4): 3 passages; B: 3 words, whole; C: 6 words -> 0, 2
    s = split(task_of(("A", 3.0), ("B", 2.0), ("C", 1.0)), TEXTS, Passages(4, 2))
    assert [(c.docid, c.score) for c in s.task.candidates] == [
        ("A#0", 3.0), ("B", 2.0), ("C#0", 1.0), ("A#1", 3.0), ("C#1", 1.0), ("A#2", 3.0)]
    assert s.docs["A#1"] == Doc("A#1", "w2 w3 w4 w5", "title A")  # the document's title kept
    assert s.docs["B"] is TEXTS["B"] and s.split == 2 and s.capped == 0
    assert s.owner["C#1"] == ("C", PassageSpan(1, 2, 6, 6, 17))


def test_nothing_longer_than_words_leaves_the_task_as_it_is():
    task = task_of(("A", 3.0), ("B", 2.0), ("C", 1.0))
    s = split(task, TEXTS, Passages(8, 4))
    assert s.task is task and s.split == 0 and s.task.passages == ()


def test_a_long_documents_passages_start_with_the_querys_widest_sigma():
    # B 3.0 (3 words: whole), C 2.0 (6 words: 2 passages), A 1.0 (8 words: 3 passages), by 4:2
    s = split(task_of(("B", 3.0), ("C", 2.0), ("A", 1.0)), TEXTS, Passages(4, 2))
    assert [c.docid for c in s.task.candidates] == ["B", "C#0", "A#0", "C#1", "A#1", "A#2"]
    assert s.task.passages == (1, 2, 3, 2, 3, 3)  # each candidate's document's passages
    mu, sigma = task_priors(s.task, Init.score, "mu/3", m=2)
    # A has more passages (3) than a window holds (2): its passages start at the widest sigma, 3/3; the rest mu/3
    assert list(mu) == [3.0, 2.0, 1.0, 2.0, 1.0, 1.0]
    assert list(sigma) == pytest.approx([1.0, 2 / 3, 1.0, 2 / 3, 1.0, 1.0])
    # a window of 3 holds all of A's: the paper's prior for every passage, as for documents ranked whole
    _, paper = task_priors(s.task, Init.score, "mu/3", m=3)
    assert list(paper) == pytest.approx([1.0, 2 / 3, 1 / 3, 2 / 3, 1 / 3, 1 / 3])
    _, whole = task_priors(replace(s.task, passages=()), Init.score, "mu/3", m=2)
    assert list(whole) == list(paper)
    # under zscore: mu = 10 + z, and A's passages start at sigma = max(mu) / 3
    mu, sigma = task_priors(s.task, Init.zscore, "mu/3", m=2)
    assert [sigma[i] for i in (2, 4, 5)] == pytest.approx([mu.max() / 3] * 3) and sigma[1] == pytest.approx(mu[1] / 3)


def test_the_answer_in_the_last_passage_of_the_last_document_comes_first():
    """The trial's corpus (issue 81) in miniature: seven documents with its passage counts (48 ... 68, 389 in all),
    first-stage scores 20 ... 14; the reranker prefers one passage, the last of the document scored lowest, and
    orders the rest at random with a few on-topic passages of the other documents above the filler. Under the
    paper's prior every passage of that document starts at mu 14 with sigma 4.7, the top document's at mu 20 with
    sigma 6.7: the answer wins its windows (other late, low passages), stays far below the threshold and never
    enters the uncertain set. Every document here has more passages than a window of 20 holds, so each passage
    starts with the widest sigma, and it surfaces."""
    counts = (48, 53, 56, 56, 48, 68, 60)
    docs = [(f"D{j}", 20.0 - j) for j in range(7)]
    texts = {d: Doc(d, words(4 * n)) for (d, _), n in zip(docs, counts)}  # 4:4 -> exactly n passages
    s = split(task_of(*docs), texts, Passages(4, 4, max_per_doc=80))
    assert s.task.n == 389 and s.task.passages
    answer = "D6#59"
    rng = random.Random(0)
    hidden = {c.docid: rng.random() + (not c.docid.startswith("D6") and rng.random() < 0.05)
              for c in s.task.candidates}
    hidden[answer] = 3.0

    def reranker(window):
        return tuple(sorted(range(len(window)), key=lambda j: -hidden[window[j]]))

    _, ranking = drive(build_strategy("acurank"), s.task, reranker)
    assert ranking[0].docid == answer
    _, before = drive(build_strategy("acurank"), replace(s.task, passages=()), reranker)
    assert [r.docid for r in before].index(answer) > 80  # the paper's prior: far down (measured: 96th of 389)


def test_a_passage_name_that_is_another_documents_id_is_refused():
    texts = {**TEXTS, "A#1": Doc("A#1", "short")}
    with pytest.raises(InputError, match="'A#1', which is another document's id"):
        split(task_of(("A", 3.0), ("A#1", 2.0)), texts, Passages(4, 2))


def outcome_of(ranking: list[tuple[str, float]]) -> QueryOutcome:
    docs = tuple(DocRating(docid=d, mu=s, sigma=1.0, s=None, rank=r, p_topk=0.1 * r)
                 for r, (d, s) in enumerate(ranking, 1))
    return QueryOutcome(qid="q1", method="acurank", ranking=tuple(Ranked(d, s) for d, s in ranking), tally=CallTally(),
                        final=lambda: RatingsSnapshot(0.0, docs))


# passages' final scores, best first: MaxP says C (5), A (4), B (3.2); the sum says A (4 + 3.5 + 3 = 10.5), C (5.5), B
RANKED = [("C#1", 5.0), ("A#0", 4.0), ("A#1", 3.5), ("B", 3.2), ("A#2", 3.0), ("C#0", 0.5)]


@pytest.mark.parametrize("how, order, scores", [
    ("maxp", ["C", "A", "B"], [5.0, 4.0, 3.2]),
    ("sum", ["A", "C", "B"], [10.5, 5.5, 3.2]),
    ("softmax", ["C", "A", "B"], [5 + math.log(1 + math.exp(-4.5)), 4 + math.log(1 + math.exp(-0.5) + math.exp(-1)),
                                  3.2]),
])
def test_a_documents_score_comes_from_its_passages(how, order, scores):
    s = split(task_of(("A", 3.0), ("B", 2.0), ("C", 1.0)), TEXTS, Passages(4, 2, Aggregate(how)))
    out = s.gather(outcome_of(RANKED))
    assert [r.docid for r in out.ranking] == order
    assert [r.score for r in out.ranking] == pytest.approx(scores)
    # each split document's best passage, and its rating as the document's (ranked as the documents are)
    assert out.passages.best == {"C": PassageSpan(1, 2, 6, 6, 17), "A": PassageSpan(0, 0, 4, 0, 11)}
    assert (out.passages.ranked, out.passages.split) == (6, 2)
    final = {d.docid: d for d in out.final().docs}
    assert final["C"].mu == 5.0 and final["A"].p_topk == pytest.approx(0.2) and final["B"].mu == 3.2
    assert [final[d].rank for d in order] == [1, 2, 3]


def test_firstp_ranks_each_documents_first_passage_only():
    s = split(task_of(("A", 3.0), ("B", 2.0), ("C", 1.0)), TEXTS, Passages(4, 2, Aggregate.firstp))
    assert [c.docid for c in s.task.candidates] == ["A#0", "B", "C#0"]
    out = s.gather(outcome_of([("C#0", 2.0), ("A#0", 1.5), ("B", 1.0)]))
    assert [r.docid for r in out.ranking] == ["C", "A", "B"]


def test_the_stats_line_holds_the_passages_and_reads_back():
    s = split(task_of(("A", 3.0), ("B", 2.0), ("C", 1.0)), TEXTS, Passages(4, 2))
    record = StatsRecord.of(s.gather(outcome_of(RANKED)))
    line = stats_line(record)
    assert line["passages"] == {"ranked": 6, "split": 2, "capped": 0,
                                "best": {"C": {"passage": 1, "words": [2, 6], "chars": [6, 17]},
                                         "A": {"passage": 0, "words": [0, 4], "chars": [0, 11]}}}
    assert stats_record(line).passages == record.passages
    assert "passages" not in stats_line(StatsRecord.of(outcome_of(RANKED)))  # documents whole: not written
