#!/usr/bin/env bash
# Rerank every sample dataset with every method of the core issue and the simulated reranker
# (noise 1.0, seed 0); writes OUT/<dataset>/<method>.run + .stats.jsonl, then evaluates them.
# Usage: scripts/simulate_all.sh [OUT] [extra rerank flags...]   (default OUT=out/sim)
set -euo pipefail
cd "$(dirname "$0")/.."
ACURANK=${ACURANK:-.venv/bin/acurank}
OUT=${1:-out/sim}; shift || true
METHODS="sw-1 sw-2 sw-3 tourrank-1 tourrank-2 ts-5-2-2-1 ts-5-3-3-3 acurank-9 acurank acurank-H acurank-HH"
for ds in dl19 dl20 dl23; do
  mkdir -p "$OUT/$ds"
  cp "sample_runs/$ds/bm25.run" "sample_runs/$ds/qrels.txt" "sample_runs/$ds/topics.tsv" "$OUT/$ds/"
  for m in $METHODS; do
    "$ACURANK" rerank "sample_runs/$ds/bm25.run" --method "$m" --reranker simulated \
      --qrels "sample_runs/$ds/qrels.txt" --sim-noise 1.0 --sim-seed 0 --quiet --overwrite \
      --output "$OUT/$ds/$m.run" --stats "$OUT/$ds/$m.stats.jsonl" "$@"
  done
  "$ACURANK" eval "$OUT/$ds/bm25.run" $(for m in $METHODS; do echo "$OUT/$ds/$m.run"; done) \
    --qrels "sample_runs/$ds/qrels.txt" --format tsv
done
