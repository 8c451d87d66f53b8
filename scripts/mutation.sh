#!/usr/bin/env bash
# Mutation testing with mutmut (configured in pyproject.toml [tool.mutmut]) over method/ (acurank, baselines, trueskill,
# trueskill_fast, uncertainty) and io/readers.py, against the tests that pin them. Not part of CI (it takes a while).
#   scripts/mutation.sh            # run, then print the summary and the surviving mutants
#   .venv/bin/mutmut show NAME     # the diff of one mutant
# Scores are in docs/mutation.md; every survivor and why it is left in docs/mutation-survivors.md, which
# the last line regenerates (it exits 1 while a survivor has no reason).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/pip install -q "mutmut>=3.3"
.venv/bin/mutmut run --max-children "${JOBS:-2}" || true
.venv/bin/mutmut results --all true | awk '{print $NF}' | sort | uniq -c
.venv/bin/python scripts/mutation_survivors.py
