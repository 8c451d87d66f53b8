"""A seeded parameter fuzzer: 1,200 command lines over methods x parameters x values, run in-process.

Every case must end in exit 0 with a run that no method could fail to produce (reranked: not the
input order; acurank-N: at most N calls a query), or in exit 2 with one message naming the flag or
the method; never a traceback, never another exit code.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import sys


from acurank_cli import cli
from conftest import small_run

METHODS = ["acurank", "acurank-H", "acurank-HH", "acurank-{n}", "acurank-r{n}", "sw-{n}", "tourrank-{n}",
           "ts-{n}", "ts-{n}-{n}", "ts-{n}-{n}-{n}"]
COUNTS = [0, 1, 1, 2, 3, 4, 9, 12]
FLAGS = ["--k", "--eps", "--tau", "--window", "--budget", "--max-rounds", "--seed", "--init", "--partition", "--stop",
         "--uncertainty", "--updater", "--depth", "--batch-queries", "--sim-noise", "--sim-seed", "--concurrency",
         "--context-size", "--temperature"]
VALUES = ["-5", "-1", "0", "1", "2", "3", "5", "10", "0.5", "0.49", "1e-9", "1.5", "100", "1000000", "nan", "inf",
          "-inf", "abc", "", "score", "zscore", "uniform", "random", "sequential", "topk-stable", "exact", "entropy",
          "fast", "library"]
#: Values each flag accepts, drawn 60 % of the time (the rest from VALUES: mostly outside the domain).
VALID = {"--k": ["1", "5", "10", "30"], "--eps": ["0.01", "0.1", "1e-4", "0.49"], "--tau": ["0", "1", "5", "10"],
         "--window": ["2", "5", "20", "50"], "--budget": ["0", "1", "5", "100"], "--max-rounds": ["1", "2", "5"],
         "--seed": ["0", "7", "-3"], "--init": ["score", "zscore", "uniform"], "--partition": ["random", "sequential"],
         "--stop": ["uncertain", "topk-stable"], "--uncertainty": ["threshold", "exact", "entropy"],
         "--updater": ["fast", "library"], "--depth": ["2", "10", "30", "100"], "--batch-queries": ["1", "2", "8"],
         "--sim-noise": ["0", "0.5", "1", "3"], "--sim-seed": ["0", "5"], "--concurrency": ["1", "4"],
         "--context-size": ["512", "4096"], "--temperature": ["0", "1"]}
CASES = int(os.environ.get("ACURANK_FUZZ_CASES", "1200"))  # the acceptance asks for >= 1,000


def _case(rng: random.Random) -> list[str]:
    method = rng.choice(METHODS).format(n="{n}")
    while "{n}" in method:
        method = method.replace("{n}", str(rng.choice(COUNTS)), 1)
    args = ["--method", method]
    for flag in rng.sample(FLAGS, rng.choice([0, 0, 1, 1, 2, 3])):
        args += [flag, rng.choice(VALID[flag]) if rng.random() < 0.6 else rng.choice(VALUES)]
    return args


def _invoke(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["acurank", *argv]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.run()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException as exc:  # noqa: BLE001 - anything escaping run() is a defect
                code = -1
                err.write(f"Traceback (escaped): {type(exc).__name__}: {exc}\n")
    finally:
        sys.argv = old
    return code, err.getvalue()


def test_parameter_fuzzer(sample, tmp_path):
    run, qids = small_run(sample, tmp_path, queries=2, depth=30)
    order = {q: [l.split()[2] for l in run.read_text().splitlines() if l.split()[0] == q] for q in qids}
    # the two queries' judgements only: the same grades for every candidate, without reading DL19's 9,260 lines
    # again for each of the 1,200 cases (about a quarter of this test's time)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(line for line in (sample / "dl19" / "qrels.txt").read_text().splitlines(keepends=True)
                             if line.split()[0] in qids))
    rng = random.Random(20261123)
    tally = {"cases": 0, "exit 0": 0, "exit 2": 0, "tracebacks": 0}
    failures = []
    for i in range(CASES):
        args = _case(rng)
        out = tmp_path / "case.run"
        stats = tmp_path / "case.stats.jsonl"
        code, err = _invoke(["rerank", str(run), "--reranker", "simulated", "--qrels", str(qrels),
                             "--no-cache", "--quiet", "--overwrite", "-o", str(out), "--stats", str(stats), *args])
        tally["cases"] += 1
        if "Traceback" in err:
            tally["tracebacks"] += 1
            failures.append((args, "traceback", err[-500:]))
            continue
        if code == 0:
            tally["exit 0"] += 1
            lines = out.read_text().splitlines()
            got = {q: [l.split()[2] for l in lines if l.split()[0] == q] for q in qids}
            depth = int(args[args.index("--depth") + 1]) if "--depth" in args else 100
            calls = [json.loads(l)["calls"] for l in stats.read_text().splitlines()]
            if min(calls) < 1:  # every query has >= 2 candidates: some window must have been sent
                failures.append((args, "exit 0 without a reranker call", ""))
            # with 10 or more candidates, a noisy oracle that returns the input order is all but impossible
            if any(got[q] == order[q][:depth] for q in qids if len(order[q][:depth]) >= 10):
                failures.append((args, "exit 0 with the input order", ""))
            method = args[1]
            if method.startswith("acurank-") and method[8:].isdigit() and max(calls) > int(method[8:]):
                failures.append((args, f"acurank-N made {max(calls)} calls", ""))
        elif code == 2:
            tally["exit 2"] += 1
            named = [a for a in args if a.startswith("--")] + [args[1]]
            message = err.strip()
            if not message or not any(n in message for n in named):
                failures.append((args, "exit 2 without naming the flag or method", message[-300:]))
        else:
            failures.append((args, f"exit {code}", err[-500:]))
    print("param fuzz:", tally)
    assert tally["cases"] >= min(CASES, 1000)
    assert not failures, failures[:5]
    assert min(tally["exit 0"], tally["exit 2"]) > CASES // 6  # both sides of the domains were exercised
