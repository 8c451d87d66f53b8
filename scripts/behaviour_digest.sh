#!/usr/bin/env bash
# Digests of everything the engine decides, to show a refactoring changed no behaviour:
# scripts/simulate_all.sh's 33 runs (+ the 3 eval tables), their stats without wall-clock fields,
# and the --trace of acurank, acurank-H and acurank-auto-9 on every sample dataset.
# Usage: scripts/behaviour_digest.sh [OUT]   (default OUT=out/digest); prints "sha256  file" lines.
set -euo pipefail
cd "$(dirname "$0")/.."
ACURANK=${ACURANK:-.venv/bin/acurank}
PY=${PY:-.venv/bin/python}
OUT=${1:-out/digest}
rm -rf "$OUT"; mkdir -p "$(dirname "$OUT")"
scripts/simulate_all.sh "$OUT" | sed "s|$OUT/||g" > "$OUT.eval.tsv"  # paths made relative
for ds in dl19 dl20 dl23; do
  for m in acurank acurank-H acurank-auto-9; do  # the methods --trace applies to
    "$ACURANK" rerank "sample_runs/$ds/bm25.run" --method "$m" --reranker simulated \
      --qrels "sample_runs/$ds/qrels.txt" --sim-noise 1.0 --sim-seed 0 --quiet --overwrite --no-cache \
      --output "$OUT/$ds/$m.traced.run" --trace "$OUT/$ds/$m.trace.jsonl"
  done
done
# stats minus what the clock decides (seconds, rerank_seconds), keys sorted
for f in "$OUT"/*/*.stats.jsonl; do
  "$PY" -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line); r.pop("seconds", None); r.pop("rerank_seconds", None)
    print(json.dumps(r, sort_keys=True))' "$f" > "$f.noclock"
done
cd "$OUT" && sha256sum */*.run */*.noclock */*.trace.jsonl ../"$(basename "$OUT")".eval.tsv | sort -k2
