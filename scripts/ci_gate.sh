#!/usr/bin/env bash
# The CI regression gate: rerank every sample run named in .ci/expected.tsv with the simulated reranker (fixed
# seed: exact figures), gate it with `acurank eval --min nDCG@10=EXPECTED`, and gate acurank-9 against sw-1
# (`--against`, no drop allowed). Every line is read (the last one too, without a final newline). Exit 1 at the first
# failed gate, with its line, or when the file holds no gate; 2 for a malformed line (FILE:LINE); 0 and
# "N gates held" else.
#     scripts/ci_gate.sh [EXPECTED.tsv]      (PY=python to use another interpreter than .venv's)
set -euo pipefail
expected=${1:-.ci/expected.tsv}
[[ "$expected" == /* || ! -e "$expected" ]] || expected="$PWD/$expected"
cd "$(dirname "$0")/.."
[[ -f "$expected" || -p "$expected" ]] || { echo "error: $expected: no such file" >&2; exit 2; }
PY=${PY:-.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gates=0
lineno=0
# every line is read, the last one too when it has no final newline
while IFS=$'\t' read -r ds method value rest || [[ -n "$ds$method$value$rest" ]]; do
  lineno=$((lineno + 1))
  [[ -z "$ds$method$value$rest" || "$ds" == \#* ]] && continue
  if [[ -z "$method" || -n "$rest" || ! "$value" =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]]; then
    echo "error: $expected:$lineno: a gate is DATASET<TAB>METHOD<TAB>nDCG@10 (a number)" >&2
    exit 2
  fi
  cmd=rerank
  [[ "$method" == sw-* || "$method" == blitz-* || "$method" == tourrank-* ]] && cmd=baseline
  "$PY" -m acurank_cli "$cmd" "sample_runs/$ds/bm25.run" --method "$method" --reranker simulated --sim-seed 0 \
    --qrels "sample_runs/$ds/qrels.txt" --no-cache --quiet --output "$out/$ds-$method.run"
  "$PY" -m acurank_cli eval "$out/$ds-$method.run" --qrels "sample_runs/$ds/qrels.txt" --min "nDCG@10=$value" >/dev/null
  gates=$((gates + 1))
done < "$expected"
if [[ $gates -eq 0 ]]; then
  echo "error: $expected: no gate (DATASET<TAB>METHOD<TAB>nDCG@10 lines): nothing was checked" >&2
  exit 1
fi
for ds in dl19 dl20 dl23; do
  if [[ -f "$out/$ds-acurank-9.run" && -f "$out/$ds-sw-1.run" ]]; then
    "$PY" -m acurank_cli eval "$out/$ds-acurank-9.run" --qrels "sample_runs/$ds/qrels.txt" \
      --against "$out/$ds-sw-1.run" --max-drop 0 >/dev/null
    gates=$((gates + 1))
  fi
done
echo "$gates gates held ($expected)"
