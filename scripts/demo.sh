#!/usr/bin/env bash
# The hedgedb demo: generates synthetic Gaussian embeddings (N x D, in classes,
# some items far more uncertain than others), stores them in a collection of a
# temporary database, runs two-stage and exhaustive searches and prints the
# results and the collection statistics.
#
# Usage: scripts/demo.sh [BUILD_DIR]      (default: build)
# Environment: DEMO_N (20000), DEMO_DIM (64), DEMO_CLASSES (50), DEMO_QUERIES (5),
#              DEMO_KEEP=1 keeps the temporary directory.
set -euo pipefail

BUILD_DIR=${1:-build}
HEDGEDB="$BUILD_DIR/bin/hedgedb"
N=${DEMO_N:-20000}
DIM=${DEMO_DIM:-64}
CLASSES=${DEMO_CLASSES:-50}
QUERIES=${DEMO_QUERIES:-5}

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
  printf '$ hedgedb %s\n' "$*"
  "$HEDGEDB" "$@"
}

section "1. Generate $N Gaussian embeddings (D=$DIM, $CLASSES classes) and $QUERIES queries"
gen_json=$(run generate --kind gaussian --n "$N" --dim "$DIM" --classes "$CLASSES" \
  --queries "$QUERIES" --seed 42 --out "$DATA")
echo "$gen_json"
# The match threshold b sits between typical same-class and other-class
# distances, so match probabilities are meaningful (a = 1).
match_b=$(sed -n 's/.*"suggested_match_b":\([0-9.]*\).*/\1/p' <<<"$gen_json")
query_labels=$(sed -n 's/.*"query_labels":\(\[[^]]*\]\).*/\1/p' <<<"$gen_json")

section "2. Create a collection (FAISS Flat candidates, Monte Carlo match probability)"
run create --db "$DB" --collection faces --kind gaussian --dim "$DIM" \
  --match-a 1 --match-b "$match_b" --samples 8 --seed 7

section "3. Ingest means, variances and labels (one atomic batch)"
t0=$(now_ms)
run ingest --db "$DB" --collection faces --mean "$DATA.mean.npy" --var "$DATA.var.npy" \
  --labels "$DATA.labels.npy"
echo "ingest took $(($(now_ms) - t0)) ms"

section "4. Two-stage search: FAISS candidates, exact Monte Carlo rescoring, top 5"
echo "query classes: $query_labels (each result shows its label: same class = a hit)"
t0=$(now_ms)
run search --db "$DB" --collection faces --mean "$DATA.query.mean.npy" \
  --var "$DATA.query.var.npy" --k 5
echo "two-stage search took $(($(now_ms) - t0)) ms for $QUERIES queries"

section "5. Exhaustive search (every item scored exactly: the ground truth)"
t0=$(now_ms)
run search --db "$DB" --collection faces --mean "$DATA.query.mean.npy" \
  --var "$DATA.query.var.npy" --k 5 --exhaustive
echo "exhaustive search took $(($(now_ms) - t0)) ms for $QUERIES queries"

section "6. The same queries ranked by the closed-form mutual likelihood score"
run search --db "$DB" --collection faces --mean "$DATA.query.mean.npy" \
  --var "$DATA.query.var.npy" --k 3 --score mls --no-uncertainty

section "7. Fetch two stored items"
run get --db "$DB" --collection faces --id 0 --id 7 | cut -c1-300

section "8. Collection statistics"
run stats --db "$DB" --collection faces
run list --db "$DB"
