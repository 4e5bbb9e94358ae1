#!/usr/bin/env bash
# Training throughput and early quality of the backbones on 2-item
# Fashion-MNIST composites: every method trained for SECONDS of wall time with
# the CNN of the encoder benchmark and with the MLP over pixels, one torch
# thread. Prints one line per run (iterations, iterations per second, images per
# second, best validation MAP@R); bench/RESULTS.md "Training setup" has a run.
#   bench/run_training_setup.sh [BUILD_DIR] [OUT_DIR]
#   env: SECONDS_PER_RUN (default 60), SETUP_NAMES (default "cnn mlp256"),
#        METHOD_NAMES (default: all seven)
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-/tmp/hedgedb-training-setup}
SECS=${SECONDS_PER_RUN:-60}
mkdir -p "$OUT"
declare -A SETUPS=(
  [cnn]="--arch cnn --conv1 16 --conv2 32 --cnn-hidden 256"
  [mlp256]="--arch mlp --mlp-hidden 256"
)
# hib: the eq. 8 likelihood, the default when RESULTS' figures were measured.
METHODS=("point:--method point" "hib1:--method hib --components 1 --hib-likelihood expected"
  "hib2:--method hib --components 2 --hib-likelihood expected"
  "spe:--method spe" "pn:--method pn" "dimco:--method dimco" "fstat:--method fstat")
printf "%-6s %-7s %10s %8s %9s %8s\n" setup method iterations iter/s images/s valMAPR
for setup in ${SETUP_NAMES:-cnn mlp256}; do
  for entry in "${METHODS[@]}"; do
    name=${entry%%:*}
    flags=${entry#*:}
    if [[ -n "${METHOD_NAMES:-}" && " $METHOD_NAMES " != *" $name "* ]]; then continue; fi
    # shellcheck disable=SC2086
    "$BUILD/bin/hedgedb" train --data fashion-mnist --items 2 $flags ${SETUPS[$setup]} \
      --max-seconds "$SECS" --iterations 100000000 --eval-every 1000 --threads 1 --seed 1 \
      --progress-seconds 1000 --out "$OUT/$setup-$name.model" >"$OUT/$setup-$name.json" 2>"$OUT/$setup-$name.log"
    /usr/bin/python3 - "$OUT/$setup-$name.json" "$setup" "$name" "$SECS" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
secs = float(d.get("seconds", sys.argv[4]))
print("%-6s %-7s %10d %8.1f %9.0f %8.3f" % (sys.argv[2], sys.argv[3], d["iterations"],
      d["iterations"] / secs, d.get("items_per_second", 0), d.get("best_validation_map_at_r") or 0))
PY
  done
done
