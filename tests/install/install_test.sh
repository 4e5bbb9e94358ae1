#!/usr/bin/env bash
# Installs the build into a staging prefix, builds examples/ against the
# installed package with find_package(hedgedb), and runs the example.
# Usage: install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/hedgedb-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/hedgedb/db.h"
test -f "$work/prefix/lib/cmake/hedgedb/hedgedbConfig.cmake"
# The shared library exports the public API only: no FAISS, RocksDB or
# internal hedgedb symbols.
lib=$(ls "$work"/prefix/lib/libhedgedb.so.*.*.* | head -1)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | c++filt)
leaked=$(echo "$exported" | grep -v -E '^(hedgedb::|typeinfo (name )?for hedgedb::|vtable for hedgedb::|_init$|_fini$)' || true)
if [[ -n "$leaked" ]]; then
  echo "libhedgedb.so exports symbols outside the public API:" >&2
  echo "$leaked" | head -20 >&2
  exit 1
fi
internal=$(echo "$exported" | grep -E 'hedgedb::(storage|index|query|calibration|report)::' || true)
if [[ -n "$internal" ]]; then
  echo "libhedgedb.so exports internal hedgedb symbols:" >&2
  echo "$internal" | head -20 >&2
  exit 1
fi
# The size of the public API, as docs/design.md states it: a new exported
# function updates both.
expected_symbols=44
count=$(echo "$exported" | grep -c -E '^hedgedb::' || true)
if [[ "$count" -ne "$expected_symbols" ]]; then
  echo "libhedgedb.so exports $count hedgedb symbols, expected $expected_symbols:" >&2
  echo "$exported" | grep -E '^hedgedb::' >&2
  exit 1
fi
# With the encoders: a program that only embeds links libhedgedb_encoders,
# which needs none of the data-set readers' libraries; those are
# libhedgedb_datasets' (OpenCV, matio, zlib).
enc=$(ls "$work"/prefix/lib/libhedgedb_encoders.so 2>/dev/null || true)
if [[ -n "$enc" ]]; then
  needed() { readelf -d "$1" | awk '/NEEDED/ {print $NF}' | tr -d '[]'; }
  readers='^lib(opencv_|matio|z\.so)'
  if needed "$enc" | grep -E "$readers" >&2; then
    echo "libhedgedb_encoders.so needs a data-set reader's library (above)" >&2
    exit 1
  fi
  datasets="$work/prefix/lib/libhedgedb_datasets.so"
  test -f "$datasets"
  for lib in libopencv_imgcodecs libmatio libz.so; do
    if ! needed "$datasets" | grep -q "^$lib"; then
      echo "libhedgedb_datasets.so does not need $lib" >&2
      exit 1
    fi
  done
  test -f "$work/prefix/include/hedgedb-encoders/datasets/load_data.h"
  test -f "$work/prefix/lib/cmake/hedgedb/hedgedbDatasetsTargets.cmake"
fi
# The installed command line: bin/hedgedb links no LibTorch/OpenCV; its encoder
# commands come from libhedgedb_cli_encoders.so, found relative to the
# executable in the installed tree too.
hedgedb="$work/prefix/bin/hedgedb"
# It runs from the prefix as installed: its run path finds libhedgedb.so
# (and the encoder module's dependencies) without LD_LIBRARY_PATH.
env -u LD_LIBRARY_PATH "$hedgedb" --help > "$work/help.txt"
grep -q search "$work/help.txt"
env -u LD_LIBRARY_PATH "$hedgedb" create --db "$work/clidb" --collection c --kind point --dim 2 \
  > "$work/create.txt"
if LD_LIBRARY_PATH="$work/prefix/lib" ldd "$hedgedb" | grep -E 'torch|opencv' >&2; then
  echo "the installed hedgedb links the encoder stack (above)" >&2
  exit 1
fi
if [[ -n "$enc" ]]; then
  test -f "$work/prefix/lib/libhedgedb_cli_encoders.so"
  env -u LD_LIBRARY_PATH "$hedgedb" train --help > "$work/train-help.txt"
  grep -q -- --method "$work/train-help.txt"
fi
cmake -S "$src/examples" -B "$work/example" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log"
cmake --build "$work/example" > "$work/build.log"
# The example must not link LibTorch.
if ldd "$work/example/storage_backend" | grep -q torch; then
  echo "the storage-backend example pulls in LibTorch" >&2
  exit 1
fi
LD_LIBRARY_PATH="$work/prefix/lib" "$work/example/storage_backend" "$work/db"
# The Python package, when built, installs beside the library and imports
# from the prefix with no environment but PYTHONPATH (its RPATH finds
# libhedgedb.so relative to itself).
package=$(ls -d "$work"/prefix/lib/python3*/dist-packages/hedgedb 2>/dev/null || true)
if [[ -n "$package" ]]; then
  PYTHONPATH=$(dirname "$package") /usr/bin/python3 -c "
import hedgedb, numpy as np, sys
with hedgedb.open(sys.argv[1]) as db:
    db.create_collection('p', kind='point', dim=3, index='Flat')
    db.ingest('p', vec=np.eye(3, dtype=np.float32))
    assert db.search('p', vec=np.eye(3, dtype=np.float32)[:1], k=1).ids[0, 0] == 0
" "$work/pydb"
fi
