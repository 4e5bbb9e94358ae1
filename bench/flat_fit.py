#!/usr/bin/python3
"""What fitting a flat index's candidate count buys and costs.

    PYTHONPATH=build/python /usr/bin/python3 bench/flat_fit.py --items 100000

A flat coarse index (Flat, SQ8, SQfp16, PQ) scans every coarse vector, but
its coarse order is not the score's: the static 10 x k candidates miss part
of the exhaustive top-10. The collection fits the candidate count instead
(query/knob_fit.h; `stats`: index_candidates). For each factory and data set
(bench/clustered_gaussians.py: uniform and spread variances; dense: standard
normal means, variances U(0.05, 1.5) per dimension, the engine test's data,
where many items lie at nearly the same coarse distance; default mc score,
match_a 1, match_b 5) this prints the fitted count, recall@10 against the exhaustive top-10
at the static 100 and at the fitted count, and the search time of the same
queries at both, alternated over --repeats rounds in one process, as the
median ratio fitted / static (the price of the recall).
"""

import argparse
import statistics
import sys
import tempfile
import time

import numpy as np

import clustered_gaussians


def recall(found, exact):
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact)]))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    clustered_gaussians.add_arguments(parser)
    parser.add_argument("--factories", nargs="+", default=["Flat", "SQ8"])
    parser.add_argument("--data", nargs="+", default=["uniform", "spread", "dense"],
                        choices=["uniform", "spread", "dense"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import hedgedb

    print(f"{args.items} items, D = {args.dim}, {args.queries} queries, k = 10, "
          f"{args.threads} thread(s)")
    print("| data | factory | fitted candidates | recall@10 at 100 | recall@10 fitted | "
          "time fitted / static (median) | ms per query static / fitted |")
    print("|---|---|---|---|---|---|---|")
    for data in args.data:
        rng = np.random.default_rng(0)
        if data == "dense":
            n = args.items + args.queries
            mean = rng.normal(size=(n, args.dim)).astype(np.float32)
            var = rng.uniform(0.05, 1.5, size=(n, args.dim)).astype(np.float32)
            mean, qmean = mean[:args.items], mean[args.items:]
            var, qvar = var[:args.items], var[args.items:]
        else:
            centres = clustered_gaussians.centers(rng, args.dim)
            mean, var = clustered_gaussians.draw(rng, centres, args.items, data == "spread")
            qmean, qvar = clustered_gaussians.draw(rng, centres, args.queries, data == "spread")
        ids = np.arange(args.items, dtype=np.int64)
        for factory in args.factories:
            with tempfile.TemporaryDirectory() as work, \
                    hedgedb.open(work + "/db", threads=args.threads) as db:
                db.create_collection("g", kind="gaussian", dim=args.dim, index=factory,
                                     match_a=1.0, match_b=5.0)
                db.ingest("g", mean=mean, var=var, ids=ids)
                db.flush()  # trains (SQ8) or saves (Flat): either fits
                fitted = int(db.stats("g")["index_candidates"])
                if fitted <= 0:
                    print(f"| {data} | {factory} | not fitted | | | | |")
                    continue
                exact = np.asarray(db.search("g", mean=qmean, var=qvar, k=10,
                                             exhaustive=True).ids)
                if fitted == 100:  # the fit kept the static count: nothing to compare
                    res = db.search("g", mean=qmean, var=qvar, k=10, candidates=100)
                    r = recall(np.asarray(res.ids), exact)
                    print(f"| {data} | {factory} | 100 | {r:.3f} | {r:.3f} | 1 (same) | |")
                    continue
                times = {100: [], fitted: []}
                found = {}
                for _ in range(args.repeats):
                    for c in (100, fitted):
                        t0 = time.perf_counter()
                        res = db.search("g", mean=qmean, var=qvar, k=10, candidates=c)
                        times[c].append(time.perf_counter() - t0)
                        found[c] = np.asarray(res.ids)
                ratio = statistics.median(f / s for f, s in zip(times[fitted], times[100]))
                ms = [1e3 * statistics.median(times[c]) / args.queries for c in (100, fitted)]
                print(f"| {data} | {factory} | {fitted} | {recall(found[100], exact):.3f} | "
                      f"{recall(found[fitted], exact):.3f} | {ratio:.2f} | "
                      f"{ms[0]:.3f} / {ms[1]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
