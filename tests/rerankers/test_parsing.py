"""Parsing listwise answers by the published rule: every non-digit separates, repeats keep the first,
out-of-range dropped, missing appended in presented order; never fatal. Expected orders by hand."""

from __future__ import annotations

import pytest

from acurank_cli.rerankers.listwise.parsing import parse_ranking


@pytest.mark.parametrize(
    "text, n, order, status",
    [
        ("[2] > [1] > [3]", 3, (1, 0, 2), "ok"),
        ("  [3]>[1]>[2]\n", 3, (2, 0, 1), "ok"),
        ("Ranking: [ 2 ] > [1] > [3]. Done.", 3, (1, 0, 2), "ok"),
        ("2 > 1 > 3", 3, (1, 0, 2), "ok"),  # bare digits are identifiers too
        ("[2] > [1]", 3, (1, 0, 2), "repaired"),  # missing appended in presented order
        ("[3]", 4, (2, 0, 1, 3), "repaired"),
        ("[2] > [2] > [1] > [3]", 3, (1, 0, 2), "repaired"),  # repeat keeps the first
        ("[3] > [1] > [3] > [2]", 3, (2, 0, 1), "repaired"),
        ("[5] > [2] > [0] > [1] > [3]", 3, (1, 0, 2), "repaired"),  # 5 and 0 out of range
        ("Passage 3.5 v2 then 2 > 1", 3, (2, 1, 0), "repaired"),  # 3, 5x, 2, 2x, 1: every digit run counts
        ("[10] > [2] > [1]", 12, (9, 1, 0, 2, 3, 4, 5, 6, 7, 8, 10, 11), "repaired"),
        ("[12]>[1]", 3, (0, 1, 2), "repaired"),  # "12" is one run, out of range; then 1
        ("", 3, (0, 1, 2), "unparseable"),
        (None, 3, (0, 1, 2), "unparseable"),
        ("I cannot rank these passages.", 3, (0, 1, 2), "unparseable"),
        ("[7] > [9]", 3, (0, 1, 2), "unparseable"),
        ("\x00\ufffd garbage ]][[ >>", 2, (0, 1), "unparseable"),
        ("[1]", 1, (0,), "ok"),
        ("whatever", 1, (0,), "ok"),
        ("", 0, (), "ok"),
    ],
)
def test_parse(text, n, order, status):
    p = parse_ranking(text, n)
    assert (p.order, p.status) == (order, status)


def test_counts():
    p = parse_ranking("[2] > [2] > [9] > [1]", 3)
    assert p.mentioned == 2 and p.dropped == 2 and p.order == (1, 0, 2)


def test_always_a_permutation():
    import random

    rng = random.Random(0)
    alphabet = "[]>0123456789 ,.\nab"
    for _ in range(500):
        n = rng.randint(1, 25)
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        p = parse_ranking(text, n)
        assert sorted(p.order) == list(range(n))
        assert p.status in ("ok", "repaired", "unparseable")
