#!/usr/bin/env bash
# Conditional against unconditional calibration on synthetic labelled
# Gaussians (docs/calibration.md, "Conditional maps"): one collection is
# calibrated with the map of the score alone (--unconditional) and with the
# default (conditional) map; held-out labelled queries are searched with
# --k 10 and checked in NumPy: mean top-1 prob against precision@1 in each
# half of the queries split at their median eta, and the ECE (15 equal-mass
# bins) of the returned top-1 and top-10.
#
#   bash bench/conditional_calibration.sh [HEDGEDB_BIN] [WORK_DIR]
set -euo pipefail
BIN=${1:-build/bin/hedgedb}
WORK=${2:-$(mktemp -d)}
N=${N:-2400} CLASSES=${CLASSES:-60} DIM=${DIM:-16} QUERIES=${QUERIES:-2000} SEED=${SEED:-1}
mkdir -p "$WORK"
"$BIN" generate --kind gaussian --n "$N" --dim "$DIM" --classes "$CLASSES" --queries "$QUERIES" \
  --seed "$SEED" --out "$WORK/g" > /dev/null
for mode in unconditional conditional; do
  DB="$WORK/db_$mode"
  rm -rf "$DB"
  "$BIN" create --db "$DB" --collection c --kind gaussian --dim "$DIM" --index Flat > /dev/null
  "$BIN" ingest --db "$DB" --collection c --mean "$WORK/g.mean.npy" --var "$WORK/g.var.npy" \
    --labels "$WORK/g.labels.npy" > /dev/null
  flag=""
  [ "$mode" = unconditional ] && flag="--unconditional"
  /usr/bin/time -f "$mode calibrate: %e s" "$BIN" calibrate --db "$DB" --collection c $flag \
    > "$WORK/calibrate_$mode.json"
  /usr/bin/time -f "$mode search --k 10: %e s" "$BIN" search --db "$DB" --collection c \
    --mean "$WORK/g.query.mean.npy" --var "$WORK/g.query.var.npy" --k 10 \
    > "$WORK/search_$mode.jsonl"
done
# Conformal match sets: 30% of the calibration queries kept out of the fit,
# then --coverage 0.9 on the held-out queries.
DB="$WORK/db_conditional"
/usr/bin/time -f "conformal calibrate: %e s" "$BIN" calibrate --db "$DB" --collection c \
  --conformal-fraction 0.3 > "$WORK/calibrate_conformal.json"
/usr/bin/time -f "search --coverage 0.9: %e s" "$BIN" search --db "$DB" --collection c \
  --mean "$WORK/g.query.mean.npy" --var "$WORK/g.query.var.npy" --coverage 0.9 \
  > "$WORK/search_conformal.jsonl"
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
import numpy as np
work = sys.argv[1]
labels = np.load(f"{work}/g.query.labels.npy")

def ece(p, y, bins=15):
    o = np.argsort(p, kind="stable"); p = p[o]; y = y[o]; n = len(p); e = 0.0
    for b in range(min(bins, n)):
        s = slice(b * n // bins, (b + 1) * n // bins)
        e += abs(p[s].mean() - y[s].mean()) * (s.stop - s.start) / n
    return e

for mode in ["unconditional", "conditional"]:
    rep = json.load(open(f"{work}/calibrate_{mode}.json"))
    lines = [json.loads(l) for l in open(f"{work}/search_{mode}.jsonl")]
    eta = np.array([l["query_uncertainty"] for l in lines])
    p = np.array([[h["prob"] for h in l["results"]] for l in lines])
    y = np.array([[h["label"] == labels[i] for h in l["results"]] for i, l in enumerate(lines)], float)
    med = np.median(eta)
    print(f"{mode}: method {rep['method']}; calibrate report (held out): ECE all {rep['after']['ece']:.4f}, "
          f"top-1 {rep['after']['ece_top1']:.4f}, top-10 {rep['after']['ece_top10']:.4f}, "
          f"worst eta-quartile gap {rep['after']['worst_eta_gap']:.3f}")
    for name, m in [("low eta ", eta < med), ("high eta", eta >= med)]:
        print(f"  {name} half: mean top-1 prob {p[m, 0].mean():.3f}, precision@1 {y[m, 0].mean():.3f}, "
              f"gap {p[m, 0].mean() - y[m, 0].mean():+.3f} ({m.sum()} queries)")
    print(f"  returned top-1 ECE {ece(p[:, 0], y[:, 0]):.4f}, top-10 ECE {ece(p.ravel(), y.ravel()):.4f}")

rep = json.load(open(f"{work}/calibrate_conformal.json"))
lines = [json.loads(l) for l in open(f"{work}/search_conformal.jsonl")]
eta = np.array([l["query_uncertainty"] for l in lines])
covered = np.array([any(h["label"] == labels[i] for h in l["results"]) for i, l in enumerate(lines)])
size = np.array([len(l["results"]) for l in lines])
med = np.median(eta)
print(f"conformal (--coverage 0.9, {rep['conformal_queries']} conformal queries): coverage "
      f"{covered.mean():.3f}, mean set size {size.mean():.1f}")
for name, m in [("low eta ", eta < med), ("high eta", eta >= med)]:
    print(f"  {name} half: coverage {covered[m].mean():.3f}, mean set size {size[m].mean():.1f}")
PY
