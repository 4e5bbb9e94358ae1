#!/usr/bin/env bash
# Runs the crash harness (bench/crash_harness.cc): CYCLES SIGKILLs of a process
# writing to a database, each followed by a check of the reopened database.
#   bench/run_crash_harness.sh [CYCLES (1000)] [BUILD_DIR (build-core)] [SEED (1)]
# Exit code 1 if any check failed (the violations are printed).
set -euo pipefail
cd "$(dirname "$0")/.."
cycles="${1:-1000}"
build="${2:-build-core}"
seed="${3:-1}"
cmake --build "$build" -j2 --target crash_harness
work="$(mktemp -d "${TMPDIR:-/tmp}/hedgedb-crash.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$build/bin/crash_harness" --dir "$work/run" --cycles "$cycles" --seed "$seed"
