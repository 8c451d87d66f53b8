"""The baselines' bookkeeping and options, with a scripted reranker: names, step numbers, seeds, scores."""

from __future__ import annotations

import random

import pytest

from acurank_cli.method.acurank_params import Init, Updater
from acurank_cli.records import Phase
from acurank_cli.method.registry import build_strategy, known_methods
from scripted import drive, keep, task


@pytest.mark.parametrize("name", ["sw-2", "tourrank-1", "ts-5-2-2-1", "acurank-HH", "acurank-r3"])
def test_strategies_keep_the_method_name(name):
    assert build_strategy(name).name == name


def test_sliding_windows_number_steps_by_pass_and_stride_never_zero():
    steps, _ = drive(build_strategy("sw-2"), task(30))
    assert [s.iteration for s, _ in steps] == [1, 1, 2, 2] and {s.phase for s, _ in steps} == {Phase.pass_}
    # m = 2 -> stride max(1, m // 2) = 1: starts 2, 1, 0 for n = 4 (by hand)
    steps, _ = drive(build_strategy("sw-1", m=2), task(4), answer=keep)
    assert [s.windows for s, _ in steps] == [(("d2", "d3"),), (("d1", "d2"),), (("d0", "d1"),)]


def test_tourrank_numbers_tournaments_and_shuffles_with_its_documented_seed():
    """Stage 1 of a tournament over 100: 5 groups entrants[g::5] of the first-stage order, each shuffled
    by random.Random("acurank|<seed>|<qid>|tourrank") in turn."""
    assert build_strategy("tourrank-1").seed == 0
    steps, ranking = drive(build_strategy("tourrank-2", seed=4), task(100, qid="q3"))
    assert [s.iteration for s, _ in steps] == [1] * 5 + [2] * 5
    assert [s.phase for s, _ in steps[:5]] == [Phase(f"stage{j}") for j in range(1, 6)]
    rng = random.Random("acurank|4|q3|tourrank")
    expected = []
    for g in range(5):
        group = [f"d{i}" for i in range(100)][g::5]
        rng.shuffle(group)
        expected.append(tuple(group))
    assert steps[0][0].windows == tuple(expected)
    assert all(r.score is None for r in ranking)


def test_trueskill_static_stages_options_and_scores():
    ts = build_strategy("ts-2-1", updater="library", init="zscore", m=10)
    assert (ts.updater, ts.init, ts.m, ts.stages) == (Updater.library, Init.zscore, 10, (2, 1))
    assert isinstance(ts.updater, Updater) and isinstance(ts.init, Init)
    steps, ranking = drive(build_strategy("ts-2-1"), task(60))
    assert [(s.phase, s.iteration, len(s.windows)) for s, _ in steps] == [(Phase.stage, 1, 2), (Phase.stage, 2, 1)]
    assert all(isinstance(r.score, float) for r in ranking)
    assert [r.score for r in ranking] == sorted((r.score for r in ranking), reverse=True)


def test_options_a_method_does_not_use_are_refused_and_none_means_not_given():
    from acurank_cli.params import NotAnOption

    strategy = build_strategy("acurank-H", m=None, eps=None, tau=7)
    assert (strategy.params.eps, strategy.params.tau, strategy.params.m) == (1e-4, 7, 20)
    with pytest.raises(NotAnOption) as exc:
        build_strategy("sw-1", eps=0.5, tau=99, m=None)
    assert str(exc.value) == "method 'sw-1' does not use eps, tau (its options: m)"
    assert exc.value.cli() == "method 'sw-1' does not use --eps, --tau (its options: --window)"
    with pytest.raises(NotAnOption, match=r"^method 'tourrank-1' does not use m \(its options: seed\)$"):
        build_strategy("tourrank-1", m=10)
    with pytest.raises(NotAnOption, match=r"^method 'ts-5-2' does not use seed \(its options: init, m, updater\)$"):
        build_strategy("ts-5-2", seed=3)
    with pytest.raises(NotAnOption, match=r"^method 'acurank' does not use stride "):
        build_strategy("acurank", stride=3)


def test_known_methods_lists_examples():
    everything = known_methods()
    baselines = known_methods(baseline_only=True)
    assert everything.split("; ")[0].startswith("acurank, acurank-H") and len(everything.split("; ")) == 6
    assert everything.split("; ")[1].startswith("acurank-auto (learns the reranker's noise), acurank-auto-9")
    assert baselines == "sw-1, sw-2, sw-3; tourrank-1, tourrank-2; ts-5-2-2-1; blitz-k20, blitz-k10"


def test_unknown_method_lists_what_is_known():
    from acurank_cli.errors import InputError

    with pytest.raises(InputError) as exc:
        build_strategy("nope", baseline_only=True)
    assert str(exc.value) == ("unknown method 'nope'; known: sw-1, sw-2, sw-3; tourrank-1, tourrank-2; ts-5-2-2-1; "
                              "blitz-k20, blitz-k10")
    with pytest.raises(InputError) as exc:
        build_strategy("acurank-9", baseline_only=True)  # a baseline command takes no AcuRank: it says where it goes
    assert str(exc.value) == ("method 'acurank-9' is not a baseline: use 'acurank rerank --method acurank-9' "
                              "(baselines: sw-1, sw-2, sw-3; tourrank-1, tourrank-2; ts-5-2-2-1; blitz-k20, blitz-k10)")


@pytest.mark.parametrize("name, option, value, says", [
    ("sw-1", "m", 1, "m=1: must be an integer >= 2"),
    ("sw-1", "passes", 0, "passes=0: must be an integer >= 1"),
    ("tourrank-1", "tournaments", 0, "tournaments=0: must be an integer >= 1"),
    ("blitz-k20", "max_rounds", 0, "max_rounds=0: must be an integer >= 1"),
    ("ts-5-2", "m", 1, "m=1: must be an integer >= 2"),
])
def test_a_baseline_record_refuses_a_value_outside_its_domain_when_built(name, option, value, says):
    """The baselines are their own parameter records: building one with a field outside its declared domain is
    refused at once (Strategy.__post_init__), in the record's words, before any task is seen."""
    from dataclasses import replace

    from acurank_cli.params import ParameterError

    with pytest.raises(ParameterError, match=f"^{says}"):
        replace(build_strategy(name), **{option: value})
