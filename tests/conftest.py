"""Shared fixtures: paths to the bundled sample runs, the spec's reference figures and shared data."""

from __future__ import annotations

import os
from dataclasses import dataclass
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings

# Under pytest-xdist every worker gets one core's worth of BLAS/torch threads (2 workers x 2 threads on
# 2 cores would oversubscribe them); subprocesses started by the tests inherit it through ENV.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, str(max(1, (os.cpu_count() or 2) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))))

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


# -- helpers shared by the test files (import them: ``from conftest import acurank, small_run, ENV``) ----

#: The environment of CLI runs: no call cache outside the test's own (a path that cannot be created).
ENV = {**os.environ, "ACURANK_CACHE": "/nonexistent-not-used", "PYTHONUNBUFFERED": "1"}


@dataclass(frozen=True)
class Ran:
    """What a command line did: exit code and its two output streams (as subprocess.CompletedProcess)."""

    returncode: int
    stdout: str
    stderr: str


def acurank(*args, stdin: str | None = None, check: bool = True, env: dict | None = None) -> Ran:
    """Run ``acurank ARGS`` in this process (the CLI's own entry point, ``cli.app.main``, with its
    streams captured by Typer's CliRunner): no interpreter start-up per command. Tests of real signals,
    pipes and fresh-process imports run ``python -m acurank_cli`` in a subprocess (with ``ENV``) instead."""
    import sys

    from typer.testing import CliRunner

    from acurank_cli.cli.app import main

    runner = CliRunner()
    overrides = {"ACURANK_CACHE": ENV["ACURANK_CACHE"], **(env or {})}
    with runner.isolation(input=stdin, env=overrides) as (out, err, _):
        code = main([str(a) for a in args])
        sys.stdout.flush()
        sys.stderr.flush()
        ran = Ran(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))
    if check and ran.returncode != 0:
        raise AssertionError(f"exit {ran.returncode}: {ran.stderr}")
    return ran


def kill_after_lines(proc: subprocess.Popen, path: Path, lines: int, timeout: float = 120) -> None:
    """SIGKILL ``proc`` once ``path`` (a stats file it appends to) holds ``lines`` lines; the test fails if the
    process ended first (nothing was left to interrupt)."""
    import signal
    import time

    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "finished before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)


def documentation() -> str:
    """The README and every docs page, one text (what a statement "the docs say" is checked against)."""
    return "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])


def run_readme_block(marker: str, path: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The python block marked ``<!-- marker -->`` in the README or a docs page, written to ``path`` and run there
    in a fresh interpreter (documentation that must run as written; ``env``: more environment)."""
    import re
    import sys

    path.write_text(re.search(rf"<!-- {marker} -->\n```python\n(.*?)```", documentation(), re.S).group(1))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env={**ENV, **(env or {})},
                          timeout=600)


def small_run(sample: Path, tmp_path: Path, queries: int = 4, depth: int = 100) -> tuple[Path, list[str]]:
    """The first few queries of the DL19 sample run (beside a copy of its topics/passages)."""
    lines = (sample / "dl19" / "bm25.run").read_text().splitlines()
    qids = list(dict.fromkeys(line.split()[0] for line in lines))[:queries]
    keep = [line for line in lines if line.split()[0] in qids and int(line.split()[3]) <= depth]
    path = tmp_path / "bm25.run"
    path.write_text("\n".join(keep) + "\n")
    return path, qids


def torn_copy(full: Path, qids: list[str], keep: int) -> tuple[Path, Path]:
    """A copy of the run ``full`` (X.run with X.stats.jsonl and X.run.meta.json beside it) as a crash after
    ``keep`` whole queries leaves it: part.run, part.stats.jsonl and the meta file. Returns (run, stats)."""
    folder = full.parent
    text = full.read_text()
    part = folder / "part.run"
    part.write_text(text[: text.index(f"{qids[keep]} Q0")])
    (folder / "part.run.meta.json").write_text((folder / f"{full.name}.meta.json").read_text())
    stats = folder / "part.stats.jsonl"
    stats.write_text("".join((folder / f"{full.stem}.stats.jsonl").read_text().splitlines(True)[:keep]))
    return part, stats


@pytest.fixture()
def runs_dir(tmp_path: Path) -> Path:
    """Two synthetic datasets of runs, qrels and stats for the report tests (tests/report_helpers.py)."""
    from report_helpers import make_runs_dir

    return make_runs_dir(tmp_path)


@pytest.fixture(scope="session")
def jvm():
    """The JVM for Lucene (started once per process); tests that need it are skipped without Java 21."""
    from acurank_cli.retrieval.jvm import JavaUnavailable, start_jvm

    try:
        return start_jvm()
    except JavaUnavailable as exc:
        pytest.skip(f"no Java 21 for Lucene: {exc}")


def chat_server(delay: float):
    """The benchmarks' loopback OpenAI-compatible chat server (benchmarks/common.py), answering every window in
    reverse after ``delay`` seconds: (server, state, lock), ``state`` counting requests."""
    import re
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import start_chat_server

    def reverse(user: str):
        n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
        return " > ".join(f"[{i}]" for i in range(n, 0, -1)), n

    return start_chat_server(delay, reverse)
