#!/usr/bin/env bash
# Search identity: a fixed workload whose every output is written to a file,
# so that two builds of hedgedb (before and after a refactoring that must not
# change behaviour, e.g. the split of query/collection.cc, docs/design.md
# "Query") can be compared byte for byte.
#
#   bash bench/search_identity.sh BIN OUT_DIR          # run the workload
#   bash bench/search_identity.sh --compare DIR_A DIR_B # cmp every output
#
# The run builds a database from scratch in OUT_DIR/work (data from
# `hedgedb generate`, fixed seeds) with three collections:
#   g: gaussian, IVF16,Flat, labels and JSON payloads; ingested as 400 items
#      (too few to train: the index file holds an untrained index) and then
#      1600 (crossing the training size: trained at that process's flush);
#   m: mog (C=2), HNSW16, 1500 items (tuned at its first save, >= 1000 items);
#   c: codes (d=16, k=16), IVF16,PQ, 300 + 1200 items.
# Each is calibrated with --conformal-fraction 0.3 (g and m on their own
# labelled items, c with held-out query tables and labels), then searched
# 47 times: --k, --exhaustive, --candidates, --label/--label-not-in,
# --min-prob, --coverage (and --coverage-by-eta), --max-false-match-rate,
# --samples auto, other scores, --payload-equals (--with-payload), --nprobe,
# --ef-search, searches after a remove and after an upsert, and stats. Every
# output goes to OUT_DIR/NN_name.out (stdout, then stderr and the exit code),
# nothing else lands there, so `--compare` (cmp over the *.out files, and the
# same file names on both sides) says whether two runs are identical.
#
# OMP_NUM_THREADS=1: FAISS builds HNSW graphs with OpenMP threads, and a
# graph built with several differs from run to run, so its candidates would.
# The collections' Monte Carlo seeds are fixed, so mc scores are reproducible.
set -euo pipefail

if [ "${1:-}" = "--compare" ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --compare DIR_A DIR_B" >&2; exit 2; }
  A=$2 B=$3 status=0
  diff <(cd "$A" && ls *.out) <(cd "$B" && ls *.out) || status=1
  for f in "$A"/*.out; do
    name=$(basename "$f")
    [ -f "$B/$name" ] || continue
    cmp -s "$f" "$B/$name" || { echo "differs: $name"; status=1; }
  done
  n=$(ls "$A"/*.out | wc -l)
  [ $status -eq 0 ] && echo "identical: $n outputs" || echo "NOT identical"
  exit $status
fi

[ $# -eq 2 ] || { echo "usage: $0 BIN OUT_DIR | $0 --compare DIR_A DIR_B" >&2; exit 2; }
BIN=$(realpath "$1")
OUT=$2
export OMP_NUM_THREADS=1
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
rm -rf "$OUT/work" "$OUT"/*.out
W=$OUT/work
DB=$W/db
mkdir -p "$W"
cd "$W"  # generate prints its file names: relative ones, the same in every run

step=0
# run NAME ARGS...: hedgedb ARGS, its stdout, stderr and exit code in NN_NAME.out.
run() {
  local name=$1
  shift
  step=$((step + 1))
  local f
  f=$(printf '%s/%02d_%s.out' "$OUT" "$step" "$name")
  set +e
  "$BIN" "$@" > "$f" 2> "$f.err"
  local rc=$?
  set -e
  { echo "--- stderr"; sed "s#$W#WORK#g" "$f.err"; echo "--- exit $rc"; } >> "$f"
  rm -f "$f.err"
}

# Data (fixed seeds).
"$BIN" generate --kind gaussian --n 2000 --dim 16 --classes 50 --queries 40 --seed 3 --out g \
  > /dev/null
"$BIN" generate --kind mog --n 1500 --dim 8 --components 2 --classes 40 --queries 30 --seed 4 \
  --out m > /dev/null
"$BIN" generate --kind codes --n 1500 --dim 16 --code-k 16 --classes 40 --queries 300 --seed 5 \
  --out c > /dev/null
/usr/bin/python3 - <<'PY'
import json
import numpy as np
mean, var, labels = np.load("g.mean.npy"), np.load("g.var.npy"), np.load("g.labels.npy")
for name, s in [("g1", slice(0, 400)), ("g2", slice(400, 2000))]:
    np.save(f"{name}.mean.npy", mean[s]); np.save(f"{name}.var.npy", var[s])
    np.save(f"{name}.labels.npy", labels[s])
    with open(f"{name}.payloads", "w") as f:
        for i in range(s.start, s.stop):
            f.write(json.dumps({"color": ["red", "green", "blue"][i % 3], "i": i}) + "\n")
codes, cl = np.load("c.codes.npy"), np.load("c.labels.npy")
np.save("c1.codes.npy", codes[:300]); np.save("c1.labels.npy", cl[:300])
np.save("c2.codes.npy", codes[300:]); np.save("c2.labels.npy", cl[300:])
# The code query tables: the first 200 calibrate, the last 100 are searched.
logp, ql = np.load("c.logp.npy"), np.load("c.query.labels.npy")
np.save("cal.logp.npy", logp[:200]); np.save("cal.labels.npy", ql[:200])
np.save("q.logp.npy", logp[200:])
# Upsert: items 5..9 of g get the vectors of items 1000..1004, new labels.
np.save("up.ids.npy", np.arange(5, 10, dtype=np.int64))
np.save("up.mean.npy", mean[1000:1005]); np.save("up.var.npy", var[1000:1005])
np.save("up.labels.npy", labels[1000:1005])
PY

G=(--db "$DB" --collection g)
M=(--db "$DB" --collection m)
C=(--db "$DB" --collection c)
GQ=(--mean g.query.mean.npy --var g.query.var.npy)
MQ=(--mean m.query.mean.npy --var m.query.var.npy --weights m.query.weights.npy)
CQ=(--logp q.logp.npy)

# Build.
run create_g create "${G[@]}" --kind gaussian --dim 16 --index IVF16,Flat --samples 16 --seed 7
run create_m create "${M[@]}" --kind mog --dim 8 --components 2 --index HNSW16 --samples 8 \
  --seed 9 --match-a 1 --match-b 2.5
run create_c create "${C[@]}" --kind codes --dim 16 --code-k 16 --index IVF16,PQ
run ingest_g1 ingest "${G[@]}" --mean g1.mean.npy --var g1.var.npy --labels g1.labels.npy \
  --payloads g1.payloads
run stats_g_untrained stats "${G[@]}"
run ingest_g2 ingest "${G[@]}" --mean g2.mean.npy --var g2.var.npy --labels g2.labels.npy \
  --payloads g2.payloads
run ingest_m ingest "${M[@]}" --mean m.mean.npy --var m.var.npy --weights m.weights.npy \
  --labels m.labels.npy
run ingest_c1 ingest "${C[@]}" --codes c1.codes.npy --labels c1.labels.npy
run ingest_c2 ingest "${C[@]}" --codes c2.codes.npy --labels c2.labels.npy
run stats_built stats --db "$DB"

# Calibrate (conformal sets held out).
run calibrate_g calibrate "${G[@]}" --conformal-fraction 0.3
run calibrate_g_csd calibrate "${G[@]}" --score csd --conformal-fraction 0.3
run calibrate_m calibrate "${M[@]}" --conformal-fraction 0.3
run calibrate_c calibrate "${C[@]}" --logp cal.logp.npy --query-labels cal.labels.npy \
  --conformal-fraction 0.3

# Gaussian.
run g_k10 search "${G[@]}" "${GQ[@]}" --k 10
run g_k1 search "${G[@]}" "${GQ[@]}" --k 1
run g_exhaustive search "${G[@]}" "${GQ[@]}" --k 10 --exhaustive
run g_candidates search "${G[@]}" "${GQ[@]}" --k 5 --candidates 300
run g_nprobe1 search "${G[@]}" "${GQ[@]}" --k 10 --nprobe 1
run g_nprobe16 search "${G[@]}" "${GQ[@]}" --k 10 --nprobe 16
run g_label search "${G[@]}" "${GQ[@]}" --k 5 --label 1,2,3
run g_label_not_in search "${G[@]}" "${GQ[@]}" --k 5 --label-not-in 0,1,2,3,4,5
run g_min_prob search "${G[@]}" "${GQ[@]}" --min-prob 0.5
run g_coverage search "${G[@]}" "${GQ[@]}" --coverage 0.9
run g_coverage_eta search "${G[@]}" "${GQ[@]}" --coverage 0.8 --coverage-by-eta
run g_fmr search "${G[@]}" "${GQ[@]}" --max-false-match-rate 0.01
run g_fmr_conf search "${G[@]}" "${GQ[@]}" --max-false-match-rate 0.05 --confidence 0.9
run g_samples_auto search "${G[@]}" "${GQ[@]}" --k 5 --samples auto --max-samples 64
run g_csd search "${G[@]}" "${GQ[@]}" --k 10 --score csd
run g_csd_min_prob search "${G[@]}" "${GQ[@]}" --score csd --min-prob 0.6
run g_mls search "${G[@]}" "${GQ[@]}" --k 10 --score mls
run g_l2 search "${G[@]}" "${GQ[@]}" --k 10 --score l2
run g_match_seed search "${G[@]}" "${GQ[@]}" --k 10 --score match --samples 32 --seed 11
run g_payload search "${G[@]}" "${GQ[@]}" --k 5 --payload-equals color=red --with-payload
run g_payload_label search "${G[@]}" "${GQ[@]}" --k 5 --payload-equals color=blue --label 4,5,6
run g_payload_none search "${G[@]}" "${GQ[@]}" --k 5 --payload-equals color=purple
run g_no_uncertainty search "${G[@]}" "${GQ[@]}" --k 10 --no-uncertainty --oversampling 3

# Mixtures (HNSW).
run m_k10 search "${M[@]}" "${MQ[@]}" --k 10
run m_exhaustive search "${M[@]}" "${MQ[@]}" --k 10 --exhaustive
run m_ef8 search "${M[@]}" "${MQ[@]}" --k 10 --ef-search 8
run m_ef200 search "${M[@]}" "${MQ[@]}" --k 10 --ef-search 200
run m_candidates search "${M[@]}" "${MQ[@]}" --k 3 --candidates 50
run m_min_prob search "${M[@]}" "${MQ[@]}" --min-prob 0.4
run m_coverage search "${M[@]}" "${MQ[@]}" --coverage 0.9
run m_coverage_eta search "${M[@]}" "${MQ[@]}" --coverage 0.9 --coverage-by-eta
run m_fmr search "${M[@]}" "${MQ[@]}" --max-false-match-rate 0.02
run m_csd search "${M[@]}" "${MQ[@]}" --k 5 --score csd
run m_label search "${M[@]}" "${MQ[@]}" --k 5 --label 7

# Codes.
run c_k10 search "${C[@]}" "${CQ[@]}" --k 10
run c_exhaustive search "${C[@]}" "${CQ[@]}" --k 10 --exhaustive
run c_nprobe2 search "${C[@]}" "${CQ[@]}" --k 10 --nprobe 2
run c_min_prob search "${C[@]}" "${CQ[@]}" --min-prob 0.5
run c_coverage search "${C[@]}" "${CQ[@]}" --coverage 0.9
run c_coverage_eta search "${C[@]}" "${CQ[@]}" --coverage 0.9 --coverage-by-eta
run c_fmr search "${C[@]}" "${CQ[@]}" --max-false-match-rate 0.05
run c_label search "${C[@]}" "${CQ[@]}" --k 5 --label-not-in 1,2

# Writes after the build: removes (IVF: physical; HNSW: tombstones) and an
# upsert, then the same searches again.
run remove_g remove "${G[@]}" --id 0,1,2,3,4,100,200,300,1500
run remove_m remove "${M[@]}" --id 10,11,12,13,14,15,700
run upsert_g ingest "${G[@]}" --ids up.ids.npy --upsert --mean up.mean.npy --var up.var.npy \
  --labels up.labels.npy
run g_k10_after search "${G[@]}" "${GQ[@]}" --k 10
run g_coverage_after search "${G[@]}" "${GQ[@]}" --coverage 0.9
run g_payload_after search "${G[@]}" "${GQ[@]}" --k 5 --payload-equals color=green --with-payload
run m_k10_after search "${M[@]}" "${MQ[@]}" --k 10
run m_exhaustive_after search "${M[@]}" "${MQ[@]}" --k 10 --exhaustive
run get_g get "${G[@]}" --id 1,5,6,1999
run stats_end stats --db "$DB"
echo "$step outputs in $OUT (compare: $0 --compare DIR_A DIR_B)"
