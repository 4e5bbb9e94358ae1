#!/usr/bin/python3
"""Python overhead of `db.search` against the C++ API, in one process.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py

A collection of N Gaussian items (D = 64, the default IVF index, trained by
flush) is searched one query at a time with k = 10: through `db.search`
from a Python loop, and through DB::Search in a C++ loop inside the module
(`db._native_search_seconds`, the baseline). Both run in this process on
the same queries, interleaved over several rounds; the table gives the
median per-query time of each and the overhead (target: under 5%).
"""

import argparse
import statistics
import tempfile
import time

import numpy as np

import hedgedb


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    centers = rng.normal(size=(1000, args.dim)).astype(np.float32)
    labels = rng.integers(0, 1000, size=args.items)
    mean = (centers[labels] + 0.3 * rng.normal(size=(args.items, args.dim))).astype(np.float32)
    var = rng.uniform(0.02, 0.2, size=(args.items, args.dim)).astype(np.float32)
    qm, qv = mean[:args.queries].copy(), var[:args.queries].copy()
    with tempfile.TemporaryDirectory() as work, hedgedb.open(work + "/db") as db:
        db.create_collection("g", kind="gaussian", dim=args.dim)
        for first in range(0, args.items, 50000):
            db.ingest("g", mean=mean[first:first + 50000], var=var[first:first + 50000])
        db.flush()
        db.search("g", mean=qm, var=qv, k=args.k)  # warm up
        python, native = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for q in range(args.queries):
                db.search("g", mean=qm[q:q + 1], var=qv[q:q + 1], k=args.k)
            python.append((time.perf_counter() - start) / args.queries)
            native.append(db._native_search_seconds("g", mean=qm, var=qv, k=args.k))
        batch_start = time.perf_counter()
        db.search("g", mean=qm, var=qv, k=args.k)
        batch = (time.perf_counter() - batch_start) / args.queries
    p, n = statistics.median(python), statistics.median(native)
    print(f"{args.items} Gaussian items, D = {args.dim}, k = {args.k}, {args.queries} queries x "
          f"{args.rounds} rounds, one query per call")
    print("| path | per query | vs C++ |")
    print("|---|---|---|")
    print(f"| C++ DB::Search loop (baseline) | {n * 1e3:.3f} ms | 1.000 |")
    print(f"| Python db.search loop | {p * 1e3:.3f} ms | {p / n:.3f} ({(p / n - 1) * 100:+.1f}%) |")
    print(f"| Python, all queries in one call | {batch * 1e3:.3f} ms | {batch / n:.3f} |")


if __name__ == "__main__":
    main()
