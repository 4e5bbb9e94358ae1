#!/usr/bin/python3
"""Per-query time of hedgedb searches per score at fixed configurations, to
compare two builds on the same data (run once per build, alternating):

    for b in /path/to/old/build build; do
      PYTHONPATH=$b/python /usr/bin/python3 bench/score_search_time.py --items 100000
    done

The data of bench/practitioner_compare.py (bench/clustered_gaussians.py,
D = 64); one thread. Configurations: exhaustive
(every item rescored: the score's own cost dominates) and two-stage at
nprobe 4 with 50 and 200 candidates, one query per call, and an exhaustive
batch of --batch queries in one call (the queries share their rows: each
row is read once for all of them); median over --rounds interleaved rounds.
Prints milliseconds per query.
"""

import argparse
import statistics
import sys
import tempfile
import time

import numpy as np

import clustered_gaussians
from machine import cpu_model


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    clustered_gaussians.add_arguments(parser)
    parser.add_argument("--exhaustive-queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=100,
                        help="queries of the exhaustive batch (0: no batch row)")
    parser.add_argument("--scores", default="mls,csd,mc")
    args = parser.parse_args()
    try:
        import hedgedb
    except ImportError:
        sys.exit("hedgedb is not importable: PYTHONPATH=build/python")
    rng = np.random.default_rng(0)
    centres = clustered_gaussians.centers(rng, args.dim)
    mean, var = clustered_gaussians.draw(rng, centres, args.items)
    qmean, qvar = clustered_gaussians.draw(rng, centres, args.queries)
    scores = args.scores.split(",")
    configs = [("exhaustive", dict(exhaustive=True), args.exhaustive_queries),
               ("nprobe 4, C 50", dict(nprobe=4, candidates=50), args.queries),
               ("nprobe 4, C 200", dict(nprobe=4, candidates=200), args.queries)]
    if args.batch > 0:
        if args.batch > args.queries:
            sys.exit(f"--batch {args.batch} is more than --queries {args.queries}")
        configs.append((f"exhaustive, batch of {args.batch}", dict(exhaustive=True, batch=True),
                        args.batch))
    with tempfile.TemporaryDirectory() as work, hedgedb.open(work + "/db", threads=1) as db:
        db.create_collection("g", kind="gaussian", dim=args.dim, match_a=1.0, match_b=5.0)
        db.ingest("g", mean=mean, var=var, ids=np.arange(args.items, dtype=np.int64))
        db.flush()
        times = {(s, c[0]): [] for s in scores for c in configs}
        for _ in range(args.rounds):
            for s in scores:
                for name, kw, nq in configs:
                    kw = dict(kw)
                    one_call = kw.pop("batch", False)
                    start = time.perf_counter()
                    if one_call:
                        db.search("g", mean=qmean[:nq], var=qvar[:nq], k=10, score=s,
                                  with_uncertainty=False, **kw)
                    else:
                        for j in range(nq):
                            db.search("g", mean=qmean[j:j + 1], var=qvar[j:j + 1], k=10,
                                      score=s, with_uncertainty=False, **kw)
                    times[(s, name)].append((time.perf_counter() - start) / nq)
    print(f"{hedgedb.__file__}: {args.items} Gaussians, D = {args.dim}, one thread, "
          f"median of {args.rounds} rounds (ms per query); {cpu_model()}")
    print("| score | " + " | ".join(c[0] for c in configs) + " |")
    print("|---" * (len(configs) + 1) + "|")
    for s in scores:
        cells = [f"{1000 * statistics.median(times[(s, c[0])]):.3f}" for c in configs]
        print(f"| {s} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
