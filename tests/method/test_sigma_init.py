"""--sigma (the supplementary variance ablation): sigma = mu/3 (the paper), mu/2, or a fixed value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from acurank_cli import ParameterError
from acurank_cli.method.acurank_params import AcuRankParams, Init, sigma_rule
from acurank_cli.method.registry import build_strategy
from acurank_cli.params import NotAnOption
from acurank_cli.method.trueskill import ENV, initial_ratings
from acurank_cli.run.fingerprint import strategy_params
from conftest import acurank, small_run


def test_sigma_rules_by_hand():
    mu, sigma = initial_ratings([12.0, 6.0], Init.score, "q")
    assert list(mu) == [12.0, 6.0] and list(sigma) == [4.0, 2.0]  # mu/3, the default
    assert list(initial_ratings([12.0, 6.0], Init.score, "q", "mu/2")[1]) == [6.0, 3.0]
    assert list(initial_ratings([12.0, 6.0], Init.score, "q", "fixed:8")[1]) == [8.0, 8.0]
    mu, sigma = initial_ratings([3.0, 1.0], Init.uniform, "q", "mu/2")
    assert list(mu) == [25.0, 25.0] and list(sigma) == [12.5, 12.5]
    assert np.array_equal(initial_ratings([3.0, 1.0], Init.uniform, "q")[1], np.full(2, ENV.sigma))


@pytest.mark.parametrize("text, parsed", [("mu/3", ("ratio", 3.0)), ("mu/2", ("ratio", 2.0)), ("fixed:8", ("fixed", 8.0)),
                                          (" mu/2.5 ", ("ratio", 2.5))])
def test_sigma_rule_parses(text, parsed):
    assert sigma_rule(text) == parsed


@pytest.mark.parametrize("bad", ["mu/0", "mu/-2", "fixed:0", "fixed:-1", "fixed:inf", "mu/nan", "mu:3", "sigma", "", 3])
def test_sigma_rule_refuses(bad):
    with pytest.raises(ParameterError, match="sigma"):
        AcuRankParams(sigma=bad)


def test_only_acurank_takes_sigma_and_the_default_leaves_the_fingerprint_alone():
    assert "sigma" not in strategy_params(build_strategy("acurank"))  # runs recorded before --sigma resume
    assert strategy_params(build_strategy("acurank", sigma="mu/2"))["sigma"] == "mu/2"
    with pytest.raises(NotAnOption, match="sigma"):
        build_strategy("ts-5-2-2-1", sigma="mu/2")


def test_cli_sigma_changes_the_run_and_a_resume_with_another_is_refused(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=3)
    qrels = sample / "dl19" / "qrels.txt"
    out = tmp_path / "s.run"
    acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out, "--sigma", "fixed:8")
    record = json.loads((tmp_path / "s.stats.jsonl").read_text().splitlines()[0])
    assert record["params"]["sigma"] == "fixed:8"
    proc = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "-o", out, "--sigma", "mu/2", check=False)
    assert proc.returncode == 2 and "params.sigma: 'fixed:8' -> 'mu/2'" in proc.stderr
    bad = acurank("rerank", run, "--reranker", "simulated", "--qrels", qrels, "--sigma", "mu/0", check=False)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("acurank: error: --sigma mu/0: must be")


# -- first-stage scores too small for the paper's prior (issue 81, item 6) ----------------------------------------


@pytest.mark.parametrize("scores,sigma,init,warned", [
    ([3.124] * 5, "mu/3", "score", True),  # median sigma 1.0413 < 0.25 x 25/6 = 1.0417
    ([3.126] * 5, "mu/3", "score", False),  # 1.0420: the paper's scale
    ([0.2, 0.5, 100.0], "mu/3", "score", True),  # the median (0.5), not the mean (33.6)
    ([9.0, 10.0, 0.01, 0.02, 0.03], "mu/3", "score", True),  # median 0.03
    ([0.1] * 5, "mu/3", "zscore", False),  # zscore: mu = 10 + z whatever the scale
    ([0.1] * 5, "fixed:2", "score", False),  # a fixed sigma does not shrink with the scores
    ([2.0] * 5, "mu/1", "score", False),  # sigma = mu: 2.0 >= 1.0417
    ([24.9] * 5, "mu/3", "score", False),  # 8.3 <= 2 x 25/6 = 8.33
    ([25.1] * 5, "mu/3", "score", True),  # 8.37: too large (AcuRank stops early)
])
def test_the_prior_scale_rule_by_hand(scores, sigma, init, warned):
    from acurank_cli.method.trueskill import prior_scale_problem

    problem = prior_scale_problem(scores, Init(init), sigma)
    assert (problem is not None) is warned
    if warned:
        assert "--init zscore" in problem and "between 3.12 and 25" in problem
        assert ("small for" if float(np.median(scores)) < 3.2 else "large for") in problem


def test_small_scores_are_warned_once_on_stderr_and_the_run_is_unchanged(tmp_path):
    """DL19's scores / 20 (median 0.46, as cosine-like scores): one warning line, even with --quiet, naming the
    remedy; the run itself is what it was (the warning changes nothing); the paper's scale: no warning."""
    lines = (Path("sample_runs/dl19/bm25.run")).read_text().splitlines()
    small = tmp_path / "small.run"
    small.write_text("".join(f"{q} {z} {d} {r} {float(s) / 20:.6f} {t}\n"
                             for q, z, d, r, s, t in (line.split() for line in lines)))
    args = ("--method", "acurank", "--reranker", "simulated", "--qrels", "sample_runs/dl19/qrels.txt", "--no-cache",
            "--quiet", "--qids", "264014,1110199", "--topics", "sample_runs/dl19/topics.tsv")
    warned = acurank("rerank", small, *args, "-o", tmp_path / "s.run")
    said = [line for line in warned.stderr.splitlines() if "are small for the paper's prior" in line]
    assert len(said) == 1 and said[0].startswith("acurank: warning: ") and "--init zscore" in said[0], warned.stderr
    paper = acurank("rerank", "sample_runs/dl19/bm25.run", *args, "-o", tmp_path / "p.run")
    assert "prior" not in paper.stderr
    assert "prior" not in acurank("rerank", small, *args, "--init", "zscore", "-o", tmp_path / "z.run").stderr
