"""Shared fixtures: paths to the bundled sample runs, the spec's reference figures and shared data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs property tests on a fixed set of examples (reproducible); locally they explore at random.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_runs"
DATA = Path(__file__).resolve().parent / "data"
SHARED = Path(os.environ.get("ACURANK_SHARED", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def sample() -> Path:
    """The bundled sample_runs folder (dl19, dl20, dl23)."""
    return SAMPLE


@pytest.fixture(scope="session")
def dl23_candidates() -> Path:
    """The published DL23 candidate file's queries, candidates, BM25 scores and qrels, in file order (the
    reference implementation's order; ties as the file has them). Its texts are left out: the simulated
    reranker needs none. A copy of shared/data/dl23/bm25-top100.acurank.jsonl, so the reference tests
    run in every clone."""
    return DATA / "dl23-bm25-top100.scores.acurank.jsonl.gz"
