#!/usr/bin/env python3
"""Cost of re-checking a mapped arena snapshot before it is written again
(RowArena::CheckMapped: a CRC32C of the mapped rows before and after the
write), measured as the time of flush() after one small ingest into a
collection whose rows were mapped at open, against the CRC32C rate alone.

Usage: HEDGEDB_PYTHON_DIR=build/python bench/arena_recheck.py [--items 200000] [--dim 64]
Run it with the Python directory of two builds to compare them.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.environ.get("HEDGEDB_PYTHON_DIR", "build/python"))
import hedgedb  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=200000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="hedgedb-arena-recheck.")
    try:
        path = os.path.join(work, "db")
        rng = np.random.default_rng(1)
        vec = rng.standard_normal((args.items, args.dim)).astype(np.float32)
        with hedgedb.open(path) as db:
            db.create_collection("c", "point", args.dim, index="Flat")
            for first in range(0, args.items, 50000):
                db.ingest("c", vec=vec[first:first + 50000])
        times = []
        for run in range(args.runs):
            with hedgedb.open(path) as db:
                st = db.stats("c")
                assert st["arena_source"] == "snapshot", st
                db.ingest("c", vec=vec[:1])
                start = time.perf_counter()
                db.flush()  # writes the snapshot again: mapped rows + 1
                times.append(time.perf_counter() - start)
        mapped = args.items * args.dim * 4
        print({"items": args.items, "row_bytes": args.dim * 4, "mapped_mb": round(mapped / 2**20, 1),
               "flush_s_median": round(float(np.median(times)), 4),
               "flush_s_all": [round(t, 4) for t in times]})
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
