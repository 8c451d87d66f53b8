#!/usr/bin/env bash
# Each bad parameter through the CLI: the one line it prints and the exit code.
# Usage: scripts/bad_params.sh [ACURANK]   (default .venv/bin/acurank)
ACURANK=${1:-.venv/bin/acurank}
RUN=sample_runs/dl19/bm25.run
QRELS=sample_runs/dl19/qrels.txt
cases=(
  "rerank $RUN --k 0" "rerank $RUN --k -1" "rerank $RUN --window 0" "rerank $RUN --window 1"
  "rerank $RUN --window -3" "baseline $RUN --method sw-0" "baseline $RUN --method tourrank-0"
  "baseline $RUN --method ts-0" "rerank $RUN --method acurank-0" "rerank $RUN --method acurank-3"
  "rerank $RUN --eps 2" "rerank $RUN --eps -1" "rerank $RUN --budget -5" "rerank $RUN --tau -1"
  "baseline $RUN --method sw-1 --eps 0.5 --tau 99" "rerank $RUN --batch-queries 0"
  "rerank $RUN --reranker simulated" "rerank $RUN --reranker openai:m --base-url http://127.0.0.1:9 --concurrency 0"
  "eval $RUN --qrels sample_runs/dl23/qrels.txt"
)
for c in "${cases[@]}"; do
  out=$($ACURANK $c 2>&1 >/dev/null | tail -1)
  code=${PIPESTATUS[0]}
  $ACURANK $c >/dev/null 2>&1; code=$?
  printf '| `acurank %s` | %s | %s |\n' "${c//$RUN/RUN}" "$out" "$code"
done
