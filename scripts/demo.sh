#!/usr/bin/env bash
# The hedgedb demo: generates synthetic Gaussian embeddings (N x D, in classes,
# some items far more uncertain than others), stores them in a collection of a
# temporary database, runs two-stage and exhaustive searches and prints the
# results and the collection statistics.
#
# Usage: scripts/demo.sh [BUILD_DIR]      (default: build/ of this repository,
#        from any working directory)
# Environment: DEMO_N (20000), DEMO_DIM (64), DEMO_CLASSES (50), DEMO_QUERIES (8),
#              DEMO_INDEX (IVF256,Flat), DEMO_KEEP=1 keeps the temporary directory.
set -euo pipefail

BUILD_DIR=${1:-$(dirname "$0")/../build}
HEDGEDB="$BUILD_DIR/bin/hedgedb"
N=${DEMO_N:-20000}
DIM=${DEMO_DIM:-64}
CLASSES=${DEMO_CLASSES:-50}
QUERIES=${DEMO_QUERIES:-8}
K=5

if [[ ! -x $HEDGEDB ]]; then
  echo "demo: $HEDGEDB not found; build first (scripts/build.sh)" >&2
  exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hedgedb-demo.XXXXXX")
if [[ ${DEMO_KEEP:-0} == 1 ]]; then
  echo "demo: keeping $WORK"
else
  trap 'rm -rf "$WORK"' EXIT
fi
DB="$WORK/db"
DATA="$WORK/faces"

now_ms() { date +%s%3N; }
section() { printf '\n== %s\n' "$*"; }
run() {
  printf '$ hedgedb %s\n' "$*" >&2
  "$HEDGEDB" "$@"
}

# One line per query of search output on stdin: the query's class, its
# uncertainty, the labels of its results and how many share its class.
# $1: the query classes, comma-separated.
summarize() {
  awk -v classes="$1" '
    BEGIN { split(classes, y, ",") }
    {
      q = NR; eta = "-"
      if (match($0, /"query_uncertainty":[^,}]*/)) eta = substr($0, RSTART + 20, RLENGTH - 20)
      rest = $0; labels = ""; hits = 0; total = 0
      while (match(rest, /"label":-?[0-9]+/)) {
        label = substr(rest, RSTART + 8, RLENGTH - 8)
        labels = labels " " label; total++
        if (label == y[q]) hits++
        rest = substr(rest, RSTART + RLENGTH)
      }
      printf "  query %d  class %-3s  uncertainty %-12s  result labels:%s  (%d/%d same class)\n",
             q - 1, y[q], eta, labels, hits, total
    }'
}

# How many of the exhaustive results ($2) the two-stage search ($1) found.
recall() {
  awk -v k="$K" '
    FNR == NR {
      rest = $0
      while (match(rest, /"id":[0-9]+/)) {
        truth[FNR, substr(rest, RSTART + 5, RLENGTH - 5)] = 1; total++
        rest = substr(rest, RSTART + RLENGTH)
      }
      next
    }
    {
      rest = $0
      while (match(rest, /"id":[0-9]+/)) {
        if ((FNR, substr(rest, RSTART + 5, RLENGTH - 5)) in truth) found++
        rest = substr(rest, RSTART + RLENGTH)
      }
    }
    END { printf "recall@%d of the two-stage search against the exhaustive one: %d/%d\n", k, found, total }
  ' "$2" "$1"
}

section "1. Generate $N Gaussian embeddings (D=$DIM, $CLASSES classes) and $QUERIES queries"
echo "(queries range from clean to heavily degraded: watch their uncertainty)"
gen_json=$(run generate --kind gaussian --n "$N" --dim "$DIM" --classes "$CLASSES" \
  --queries "$QUERIES" --spread-queries --seed 42 --out "$DATA")
echo "$gen_json"
# The match threshold b sits between typical same-class and other-class
# distances, so match probabilities are meaningful (a = 1).
match_b=$(sed -n 's/.*"suggested_match_b":\([0-9.]*\).*/\1/p' <<<"$gen_json")
query_classes=$(sed -n 's/.*"query_labels":\[\([^]]*\)\].*/\1/p' <<<"$gen_json")

# The default coarse index (IVF1024,Flat) trains once a collection holds
# 39 x 1024 vectors and searches exhaustively until then; 256 lists train on
# 9,984, so the demo's collection gets a real FAISS stage 1.
INDEX=${DEMO_INDEX:-IVF256,Flat}
section "2. Create a collection ($INDEX candidates, Monte Carlo match probability)"
run create --db "$DB" --collection faces --kind gaussian --dim "$DIM" --index "$INDEX" \
  --match-a 1 --match-b "$match_b" --samples 8 --seed 7

section "3. Ingest means, variances and labels (one atomic batch)"
t0=$(now_ms)
run ingest --db "$DB" --collection faces --mean "$DATA.mean.npy" --var "$DATA.var.npy" \
  --labels "$DATA.labels.npy"
echo "ingest took $(($(now_ms) - t0)) ms (including opening the database)"

QUERY_FLAGS=(--db "$DB" --collection faces --mean "$DATA.query.mean.npy"
  --var "$DATA.query.var.npy" --k "$K")

section "4. Two-stage search: FAISS candidates, exact Monte Carlo rescoring, top $K"
t0=$(now_ms)
run search "${QUERY_FLAGS[@]}" >"$WORK/two_stage.jsonl"
elapsed=$(($(now_ms) - t0))
cat "$WORK/two_stage.jsonl"
echo "summary:"
summarize "$query_classes" <"$WORK/two_stage.jsonl"
echo "two-stage search took $elapsed ms for $QUERIES queries (including opening the database)"

section "5. Exhaustive search: every item scored exactly (the ground truth)"
t0=$(now_ms)
run search "${QUERY_FLAGS[@]}" --exhaustive >"$WORK/exhaustive.jsonl"
elapsed=$(($(now_ms) - t0))
summarize "$query_classes" <"$WORK/exhaustive.jsonl"
echo "exhaustive search took $elapsed ms for $QUERIES queries (including opening the database)"
recall "$WORK/two_stage.jsonl" "$WORK/exhaustive.jsonl"

section "6. The same queries ranked by the closed-form mutual likelihood score"
run search "${QUERY_FLAGS[@]}" --score mls --no-uncertainty | summarize "$query_classes"

section "7. Fetch two stored items (vectors shortened)"
run get --db "$DB" --collection faces --id 0 --id 7 | cut -c1-160

section "8. Collection statistics"
run stats --db "$DB" --collection faces
run list --db "$DB"
