#!/usr/bin/env bash
# The main job: install dependencies, build, and run the demo (create a
# collection, ingest generated Gaussian embeddings, search, print results).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
bash scripts/demo.sh "${BUILD_DIR:-build}"
