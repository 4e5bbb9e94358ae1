#!/usr/bin/env bash
# The full test suite: install dependencies, build, run every test with CTest,
# then the core suite again under ASan + UBSan (scripts/sanitize.sh address
# --core: every test of the engine, storage, index, query, calibration,
# report and engine CLI code, built instrumented into build-asan/).
# HEDGEDB_TEST_SANITIZE=0 skips the second part (about 11 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 900
if [[ "${HEDGEDB_TEST_SANITIZE:-1}" != 0 ]]; then
  BUILD_DIR=build-asan bash scripts/sanitize.sh address --core
fi
