#!/usr/bin/env bash
# The CI regression gate: rerank every sample run named in .ci/expected.tsv with the simulated reranker (fixed
# seed: exact figures), gate it with `acurank eval --min nDCG@10=EXPECTED`, and gate acurank-9 against sw-1
# (`--against`, no drop allowed). Exit 1 at the first failed gate, with its line; 0 and "gates held" lines else.
#     scripts/ci_gate.sh [EXPECTED.tsv]      (PY=python to use another interpreter than .venv's)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
expected=${1:-.ci/expected.tsv}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
while IFS=$'\t' read -r ds method value; do
  [[ -z "$ds" || "$ds" == \#* ]] && continue
  cmd=rerank
  [[ "$method" == sw-* || "$method" == blitz-* || "$method" == tourrank-* ]] && cmd=baseline
  "$PY" -m acurank_cli "$cmd" "sample_runs/$ds/bm25.run" --method "$method" --reranker simulated --sim-seed 0 \
    --qrels "sample_runs/$ds/qrels.txt" --no-cache --quiet --output "$out/$ds-$method.run"
  "$PY" -m acurank_cli eval "$out/$ds-$method.run" --qrels "sample_runs/$ds/qrels.txt" --min "nDCG@10=$value" >/dev/null
done < "$expected"
for ds in dl19 dl20 dl23; do
  if [[ -f "$out/$ds-acurank-9.run" && -f "$out/$ds-sw-1.run" ]]; then
    "$PY" -m acurank_cli eval "$out/$ds-acurank-9.run" --qrels "sample_runs/$ds/qrels.txt" \
      --against "$out/$ds-sw-1.run" --max-drop 0 >/dev/null
  fi
done
