#!/usr/bin/env bash
# The paper's efficiency table: sw-1, tourrank-1, acurank-9, acurank on DL19 and DL20, with
#  - the simulated reranker (noise 1, seed 0), each call's tokens counted as the published prompt would cost
#    (--sim-tokens gpt-4o) and FLOPs estimated for a RankZephyr-sized model (--model-params 7.24e9);
#  - minilm (FLOPs from its own 22.7M parameters; --no-cache, so latency is the model's).
# Usage: scripts/efficiency_table.sh [OUT]   (default OUT=out/eff); prints both tables (markdown).
set -euo pipefail
cd "$(dirname "$0")/.."
ACURANK=${ACURANK:-.venv/bin/acurank}
OUT=${1:-out/eff}
for setting in sim minilm; do
  for ds in dl19 dl20; do
    mkdir -p "$OUT/$setting/$ds"
    cp "sample_runs/$ds/qrels.txt" "$OUT/$setting/$ds/"
    for m in sw-1 tourrank-1 acurank-9 acurank; do
      if [ "$setting" = sim ]; then
        flags=(--reranker simulated --sim-noise 1.0 --sim-seed 0 --sim-tokens gpt-4o --model-params 7.24e9)
      else
        flags=(--reranker minilm --no-cache)
      fi
      "$ACURANK" rerank "sample_runs/$ds/bm25.run" --method "$m" "${flags[@]}" --qrels "sample_runs/$ds/qrels.txt" \
        --quiet --overwrite --output "$OUT/$setting/$ds/$m.run" 2>/dev/null
    done
  done
  "$ACURANK" report efficiency --runs "$OUT/$setting" --baseline sw-1 -f markdown
done
