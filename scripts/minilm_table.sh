#!/usr/bin/env bash
# The offline CPU model on every sample dataset: bm25, sw-1, acurank-9, acurank with --reranker minilm.
# Each method runs as a fresh process (no call cache, no shared embeddings), so wall seconds are honest.
# Usage: scripts/minilm_table.sh [OUT] (default out/minilm)
set -euo pipefail
cd "$(dirname "$0")/.."
ACURANK=${ACURANK:-.venv/bin/acurank}
OUT=${1:-out/minilm}
METHODS=${METHODS:-"sw-1 acurank-9 acurank"}
for ds in ${DATASETS:-dl19 dl20 dl23}; do
  mkdir -p "$OUT/$ds"
  cp "sample_runs/$ds/bm25.run" "sample_runs/$ds/qrels.txt" "sample_runs/$ds/topics.tsv" "$OUT/$ds/"
  for m in $METHODS; do
    start=$EPOCHREALTIME
    "$ACURANK" rerank "sample_runs/$ds/bm25.run" --method "$m" --reranker minilm --no-cache --quiet \
      --batch-queries 4 --overwrite --output "$OUT/$ds/$m.run" --stats "$OUT/$ds/$m.stats.jsonl"
    awk -v a="$start" -v b="$EPOCHREALTIME" -v d="$ds" -v m="$m" 'BEGIN{printf "wall %s %s %.1f s\n", d, m, b-a}'
  done
  "$ACURANK" eval "$OUT/$ds/bm25.run" $(for m in $METHODS; do echo "$OUT/$ds/$m.run"; done) \
    --qrels "sample_runs/$ds/qrels.txt" --format tsv
done
