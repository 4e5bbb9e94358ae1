#!/usr/bin/env bash
# bin/hedgedb starts without the encoder stack: neither the executable nor
# anything it links needs LibTorch, OpenCV, matio or the encoders and data-set
# libraries, and an engine command (and --help) loads none of them at run
# time; only an encoder command loads them, through its module.
# Usage: engine_libraries_test.sh BIN_DIR
set -euo pipefail
bin=$1/hedgedb
# Matched against library file names only (ldd's load addresses are hex
# digits, and "c10" is one: a match there once failed this test by chance).
heavy='^lib(torch|c10|opencv|matio|hedgedb_encoders|hedgedb_datasets|hedgedb_cli_encoders)'
if ldd "$bin" | awk '{print $1}' | sed 's|.*/||' | grep -E "$heavy" >&2; then
  echo "$bin links the encoder stack (above)" >&2
  exit 1
fi
db=$(mktemp -d "${TMPDIR:-/tmp}/hedgedb-libs-test.XXXXXX")
trap 'rm -rf "$db"' EXIT
"$bin" create --db "$db" --collection c --kind point --dim 2 > /dev/null
loaded() {
  LD_DEBUG=libs "$bin" "$@" 2>&1 >/dev/null | awk '/calling init:/ {print $NF}' | sed 's|.*/||'
}
for args in "list --db $db" "--help"; do
  # shellcheck disable=SC2086  # the words of args are the command's arguments
  if loaded $args | grep -E "$heavy" >&2; then
    echo "hedgedb $args loaded the encoder stack (above)" >&2
    exit 1
  fi
done
# The encoder commands (in a build with them) still load their module.
if "$bin" --help | grep -q '^  train ' && ! loaded train --help | grep -q hedgedb_cli_encoders; then
  echo "hedgedb train --help did not load libhedgedb_cli_encoders.so" >&2
  exit 1
fi
