#!/usr/bin/env bash
# Builds hedgedb with a sanitizer and runs tests under it.
#   scripts/sanitize.sh address [--core]  ASan + UBSan into build-asan, the whole suite
#   scripts/sanitize.sh thread  [--core]  TSan into build-tsan, the concurrent tests
# --core builds without the LibTorch encoders (-DHEDGEDB_WITH_ENCODERS=OFF),
# much cheaper to build. Extra arguments after the mode go to ctest.
# Exits non-zero if the build fails, a test fails or a sanitizer reports.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh >/dev/null
root=$PWD

mode=${1:-}
shift || true
case "$mode" in
  address) build_dir=${BUILD_DIR:-build-asan} ;;
  thread) build_dir=${BUILD_DIR:-build-tsan} ;;
  *)
    echo "usage: $0 address|thread [--core] [ctest arguments...]" >&2
    exit 2
    ;;
esac
encoders=ON
if [[ "${1:-}" == "--core" ]]; then
  encoders=OFF
  shift
fi
jobs=${JOBS:-$(nproc)}

# A report ends the process with a non-zero exit code, so the test fails.
# ASan + UBSan: leak checking on; the suppressions cover leaks inside the
# uninstrumented system libraries only (see the file). No
# detect_stack_use_after_return: with g++ 12 it faults on a valid stack array
# read inside the AVX-512 kernels (query/kernels_avx512.cc, -mavx512f, 64-byte
# aligned frame), which pass without it.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# TSan: the OpenMP runtime (libgomp) is not instrumented, so its barriers are
# invisible to TSan; one OpenMP thread keeps FAISS and the scorer loops serial
# and the remaining reports are about this project's own threads.
# ignore_noninstrumented_modules: memcpy and friends called from the
# uninstrumented libraries (RocksDB's memtable and flush threads copy through
# libstdc++) are not checked; their stacks stop at the library, so no
# suppression could name them. This project's own accesses are instrumented.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$root/scripts/tsan.supp"
if [[ "$mode" == thread ]]; then
  export OMP_NUM_THREADS=1
fi

start=$SECONDS
# RelWithDebInfo: optimised like the release build, with line numbers in reports.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEDGEDB_SANITIZE="$mode" \
  -DHEDGEDB_WITH_ENCODERS="$encoders" -DHEDGEDB_BUILD_BENCH=OFF -DHEDGEDB_WITH_PYTHON=OFF
if [[ "$mode" == address ]]; then
  cmake --build "$build_dir" -j"$jobs"
else
  # Only the test programs of the concurrent code (see below).
  cmake --build "$build_dir" -j"$jobs" --target common_test query_test engine_test
fi
build_seconds=$((SECONDS - start))

start=$SECONDS
status=0
if [[ "$mode" == address ]]; then
  # Tests labelled no_sanitize cannot run instrumented (see docs/testing.md).
  ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" --timeout 1800 -LE no_sanitize "$@" ||
    status=$?
else
  # The tests that run threads of this project: the engine (concurrent
  # readers and writers, parallel scoring and calibration), the query layer
  # (parallel scoring) and common (a .npy reader fed by a writer thread).
  ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" --timeout 1800 -LE no_sanitize \
    -L '^(common|query|engine)$' "$@" || status=$?
fi
test_seconds=$((SECONDS - start))
echo "sanitize.sh $mode (encoders $encoders): build ${build_seconds}s, tests ${test_seconds}s, status $status"
exit "$status"
