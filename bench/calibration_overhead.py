#!/usr/bin/env python3
"""What the conditional calibration map and conformal sets cost.

Fitting: `calibrate` (dry run: fitted and reported, not stored) of one
collection with the map of the score alone (--unconditional) and with the
default conditional map, in interleaved rounds; the ratio conditional /
unconditional.

Searching: the same queries (top-10) against the same items in three
collections that differ only in their calibration: none, the score alone,
the conditional map (fitted with 30% of the queries kept out for conformal
sets and false-match thresholds); plus `coverage=0.9` and
`max_false_match_rate=0.01` on the last. Interleaved rounds, the median time
of each, as a ratio to the uncalibrated search of the same round set.

One thread (OMP_NUM_THREADS=1, set before hedgedb loads) so that the ratios
are not the scheduler's. Prints the CPU model beside the figures.

    /usr/bin/python3 bench/calibration_overhead.py [--items 10000] [--rounds 5]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ["OMP_NUM_THREADS"] = "1"
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("HEDGEDB_PYTHON_DIR", os.path.join(HERE, "..", "build", "python")))
import hedgedb  # noqa: E402
from machine import cpu_model  # noqa: E402  (bench/machine.py, beside this script)


def clustered(rng, n, dim, classes, centres):
    """Gaussians around class centres; noise and variances vary per item, so
    some items are ambiguous and eta means something."""
    labels = rng.integers(0, classes, n)
    noise = 0.3 + 1.5 * rng.random(n)
    mean = centres[labels] + noise[:, None] * rng.standard_normal((n, dim))
    var = 0.05 + noise[:, None] ** 2 * rng.random((n, dim))
    return mean.astype(np.float32), var.astype(np.float32), labels.astype(np.int64)


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--max-pairs", type=int, default=4000000,
                    help="calibrate's max_pairs (the quickstart's: every item a query)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if min(a.items, a.queries, a.dim, a.classes, a.rounds, a.max_pairs) < 1:
        ap.error("every size must be >= 1")
    rng = np.random.default_rng(a.seed)
    centres = 2.0 * rng.standard_normal((a.classes, a.dim))
    mean, var, labels = clustered(rng, a.items, a.dim, a.classes, centres)
    qmean, qvar, _ = clustered(rng, a.queries, a.dim, a.classes, centres)

    work = tempfile.mkdtemp(prefix="hedgedb_calib_bench_")
    try:
        db = hedgedb.open(os.path.join(work, "db"))
        for name in ("none", "alone", "conditional"):
            db.create_collection(name, kind="gaussian", dim=a.dim, match_a=1.0, match_b=2.0)
            db.ingest(name, mean=mean, var=var, labels=labels)
            db.flush()

        print(f"{cpu_model()}, 1 thread; {a.items} Gaussians (D = {a.dim}, {a.classes} classes), "
              f"{a.queries} queries, {a.rounds} interleaved rounds (median)")
        fit = {"alone": [], "conditional": []}
        reports = {}
        for _ in range(a.rounds):
            for name, unconditional in (("alone", True), ("conditional", False)):
                t, rep = timed(db.calibrate, "alone", unconditional=unconditional,
                                  max_pairs=a.max_pairs, dry_run=True)
                fit[name].append(t)
                reports[name] = rep
        pairs = reports["conditional"]["pairs"]
        med = {k: statistics.median(v) for k, v in fit.items()}
        print(f"\nfitting on {pairs} pairs (calibrate, dry run):")
        for name in fit:
            print(f"  {name:12s} {med[name]:7.2f} s  (method {reports[name]['method']})")
        print(f"  ratio conditional / score alone: {med['conditional'] / med['alone']:.2f}")

        db.calibrate("alone", unconditional=True, max_pairs=a.max_pairs)
        db.calibrate("conditional", conformal_fraction=0.3, max_pairs=a.max_pairs)
        cases = [
            ("no map", "none", {}),
            ("score alone", "alone", {}),
            ("conditional", "conditional", {}),
            # Sets and false-match thresholds are threshold searches: compare
            # them with a min_prob search, not with top-10.
            ("min_prob 0.1", "conditional", {"min_prob": 0.1, "max_results": 100000}),
            ("coverage 0.9", "conditional", {"coverage": 0.9, "max_results": 100000}),
            ("false-match 0.01", "conditional",
             {"max_false_match_rate": 0.01, "max_results": 100000}),
        ]
        times = {c[0]: [] for c in cases}
        returned = {}
        for _ in range(a.rounds):
            for label, coll, kw in cases:
                kwargs = {"k": 10} if not kw else dict(kw)
                t, res = timed(db.search, coll, mean=qmean, var=qvar, **kwargs)
                times[label].append(t)
                returned[label] = float(np.mean(np.sum(np.isfinite(res.scores), axis=1)))
        base = statistics.median(times["no map"])
        print(f"\nsearch, {a.queries} queries per call:")
        print(f"  {'case':18s} {'ms/query':>9s} {'ratio':>6s} {'results/query':>14s}")
        for label, _, _ in cases:
            m = statistics.median(times[label])
            print(f"  {label:18s} {1000 * m / a.queries:9.3f} {m / base:6.2f} {returned[label]:14.1f}")
        db.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
