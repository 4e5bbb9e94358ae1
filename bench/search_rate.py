#!/usr/bin/python3
"""Queries per second of one hedgedb build on 100,000 clustered Gaussians
(D = 64, bench/clustered_gaussians.py), in batches of 100 and one query per
call, for A/B runs of two builds on a shared machine: alternate them and
compare the medians of each pair.

    for i in 1 2 3; do for b in BEFORE AFTER; do
      PYTHONPATH=$b /usr/bin/python3 bench/search_rate.py --score mls
    done; done

One thread; k = 10, --nprobe (2) and --candidates (50), uncertainty off:
the mls operating point of bench/practitioner_compare.py at recall 0.99.
Prints one line: the median and best of --rounds rounds of each mode.
"""
import argparse
import statistics
import tempfile
import time

import numpy as np

import clustered_gaussians


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--score", default="mls", help="mc, mls, csd, ... (default mls)")
    ap.add_argument("--items", type=int, default=100000)
    ap.add_argument("--nprobe", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import hedgedb

    rng = np.random.default_rng(0)
    centres = clustered_gaussians.centers(rng, 64)
    mean, var = clustered_gaussians.draw(rng, centres, args.items)
    qm, qv = clustered_gaussians.draw(rng, centres, 1000)
    kw = dict(k=10, nprobe=args.nprobe, candidates=args.candidates, score=args.score,
              with_uncertainty=False)
    with tempfile.TemporaryDirectory() as work, hedgedb.open(work + "/db", threads=1) as db:
        db.create_collection("g", kind="gaussian", dim=64, match_a=1.0, match_b=5.0)
        db.ingest("g", mean=mean, var=var, ids=np.arange(args.items, dtype=np.int64))
        db.flush()
        batches, ones = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for lo in range(0, 1000, 100):
                db.search("g", mean=qm[lo:lo + 100], var=qv[lo:lo + 100], **kw)
            batches.append(1000 / (time.perf_counter() - start))
            start = time.perf_counter()
            for j in range(300):
                db.search("g", mean=qm[j:j + 1], var=qv[j:j + 1], **kw)
            ones.append(300 / (time.perf_counter() - start))
    print(f"{args.score}: batches of 100 median {statistics.median(batches):,.0f} q/s "
          f"(best {max(batches):,.0f}); one query per call median "
          f"{statistics.median(ones):,.0f} (best {max(ones):,.0f})")


if __name__ == "__main__":
    main()
