#!/usr/bin/env bash
# Rerank every sample dataset with every method of the core issue and the simulated reranker
# (noise 1.0, seed 0); writes OUT/<dataset>/<method>.run + .stats.jsonl, then evaluates them.
# Usage: scripts/simulate_all.sh [OUT] [extra rerank flags...]   (default OUT=out/sim)
# The 33 reranks and 3 evals run as acurank commands in one Python process (scripts/simulate_all.py):
# PYTHON names the interpreter (default .venv/bin/python; another checkout's: run that checkout's script).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" scripts/simulate_all.py "$@"
