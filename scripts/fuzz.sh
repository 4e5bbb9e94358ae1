#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang-14) into ${BUILD_DIR:-build-fuzz}
# and runs each for SECONDS_PER_TARGET (default 60) on a copy of its seed
# corpus fuzz/corpus/<target>/, printing the executions per target. Fails if
# any target finds a crash, a leak, a sanitizer error, an out-of-memory or a
# slow input (> 10 s); the input is kept
# under ${FUZZ_OUT:-build-fuzz/fuzz-out}/<target>/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   scripts/fuzz.sh --seeds     regenerates fuzz/corpus/ from the writers
#                               (files named finding-* are inputs of fixed
#                               findings, kept in the corpus as they are)
# Not part of scripts/test.sh. Installs clang-14, libclang-rt-14-dev and llvm-14
# with the other dependencies (scripts/install_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh clang-14 libclang-rt-14-dev llvm-14 >/dev/null
BUILD_DIR=${BUILD_DIR:-build-fuzz}
FUZZ_OUT=${FUZZ_OUT:-$BUILD_DIR/fuzz-out}
JOBS=${JOBS:-2}
TARGETS_ALL="npy py_args record catalog_spec index_header arena calibration_map model_file idx cub cars
  payload payload_lines"

CC=${CC:-clang-14} CXX=${CXX:-clang++-14} cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
  -DHEDGEDB_FUZZ=ON -DHEDGEDB_WITH_ENCODERS=OFF -DHEDGEDB_WITH_PYTHON=OFF -DHEDGEDB_BUILD_TESTS=OFF \
  -DHEDGEDB_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" --target fuzzers -j"$JOBS" >/dev/null

if [[ "${1:-}" == "--seeds" ]]; then
  find fuzz/corpus -type f ! -name 'finding-*' -delete 2>/dev/null || true
  "$BUILD_DIR/fuzz/make_seeds" fuzz/corpus
  find fuzz/corpus -type f | sort
  exit 0
fi

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=${*:-$TARGETS_ALL}
# The parsers that read files write their input to a scratch file: keep it in
# memory when /dev/shm exists.
[[ -d /dev/shm ]] && export TMPDIR=${TMPDIR:-/dev/shm}

failed=0
total=0
for t in $TARGETS; do
  out="$FUZZ_OUT/$t"
  rm -rf "$out" && mkdir -p "$out/corpus" "$out/artifacts"
  cp fuzz/corpus/"$t"/* "$out/corpus/" 2>/dev/null || true
  rc=0
  "$BUILD_DIR/fuzz/${t}_fuzzer" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/" "$out/corpus" >"$out/log.txt" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log.txt" | tail -1)
  total=$((total + ${runs:-0}))
  if [[ $rc -ne 0 ]] || compgen -G "$out/artifacts/*" >/dev/null; then
    echo "$t: FAILED (exit $rc) after ${runs:-?} executions; see $out/log.txt"
    ls "$out"/artifacts/
    failed=1
  else
    echo "$t: ${runs:-?} executions in ${SECONDS_PER_TARGET} s, no findings"
  fi
done
echo "total: $total executions"
exit $failed
