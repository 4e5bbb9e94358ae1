#!/usr/bin/python3
"""One large collection measured end to end: ingest, memory, disk, reopen,
latency and throughput, recall against the exact top-10.

    PYTHONPATH=build/python /usr/bin/python3 bench/scale_run.py \
        --items 10000000 --dir /path/with/room

N Gaussians are ingested in batches of 100,000 with sequential ids into a
collection with the default index (or --index), then flushed
(the index trained, tuned and saved). Reported: ingest time and rate, the
process's resident memory growth per item, the database's disk bytes per
item, then for one and two threads (the database reopened with
`threads=`): the reopen (open + the first search, which loads the
collection), the latency of one query per call after a warm-up pass (p50,
p99), queries per second in batches of 100, and recall@10 of the default
search against an exhaustive search on the first --exact-queries queries.
Prints one JSON object per measurement, then the peak resident memory.

The items (--source):
  clustered  D = 64 clustered Gaussians (bench/clustered_gaussians.py: 1,000
             centres, mean noise 0.3, variances U(0.02, 0.2)).
  real       resampled real embeddings: the Gaussians a trained encoder gave
             real images (the PREFIX.mean.npy / PREFIX.var.npy that
             bench/real_embeddings.py writes under its --out, e.g.
             build/bench-real/hib-k1.items), scaled up to --items by
             drawing, for each new item, one real item at random and a new
             view of it: mean + sqrt(var) * N(0, I) * --view-noise, its
             variance times exp(N(0, 0.1^2)) per item. So the new items keep
             the real ones' cluster structure and spread of uncertainty, and
             no two are the same. Queries are drawn the same way.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

import numpy as np

import clustered_gaussians
from machine import disk_bytes, rss_bytes


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    clustered_gaussians.add_arguments(parser)
    parser.add_argument("--exact-queries", type=int, default=20)
    parser.add_argument("--dir", required=True, help="a directory with room for the database")
    parser.add_argument("--source", choices=("clustered", "real"), default="clustered")
    parser.add_argument("--real", metavar="PREFIX",
                        help="--source real: PREFIX.mean.npy and PREFIX.var.npy")
    parser.add_argument("--view-noise", type=float, default=0.5,
                        help="--source real: scale of a new view's offset (default 0.5)")
    parser.add_argument("--index", default="",
                        help="FAISS factory string of the collection (default: the "
                             "collection's default)")
    parser.add_argument("--sweep-nprobe", default="",
                        help="comma-separated nprobe values: after the default search, "
                             "recall@10 and p50 latency (1 thread) for each with each of "
                             "--sweep-candidates")
    parser.add_argument("--sweep-candidates", default="100,200,400,800")
    args = parser.parse_args()
    if args.source == "real":
        if not args.real:
            parser.error("--source real needs --real PREFIX")
        for suffix in (".mean.npy", ".var.npy"):
            if not os.path.exists(args.real + suffix):
                parser.error(f"{args.real + suffix} does not exist (run bench/real_embeddings.py)")
    import hedgedb

    path = os.path.join(args.dir, "scale_db")
    if os.path.exists(path):
        sys.exit(f"{path} exists: give an empty --dir")
    rng = np.random.default_rng(0)
    if args.source == "real":
        real_mean = np.load(args.real + ".mean.npy").astype(np.float32)
        real_var = np.load(args.real + ".var.npy").astype(np.float32)
        if real_mean.ndim != 2 or real_mean.shape != real_var.shape:
            sys.exit(f"{args.real}: mean {real_mean.shape} and var {real_var.shape} are not "
                     "two equal (items, D) arrays (a gaussian collection's embeddings)")
        args.dim = real_mean.shape[1]

        def draw(n):
            pick = rng.integers(0, len(real_mean), size=n)
            sd = np.sqrt(real_var[pick])
            mean = real_mean[pick] + args.view_noise * sd * rng.normal(size=sd.shape)
            var = real_var[pick] * np.exp(0.1 * rng.normal(size=(n, 1)))
            return mean.astype(np.float32), var.astype(np.float32)
    else:
        centres = clustered_gaussians.centers(rng, args.dim)

        def draw(n):
            return clustered_gaussians.draw(rng, centres, n)
    qmean, qvar = draw(args.queries)
    rows = []

    def report(what, **values):
        values["what"] = what
        print(json.dumps(values), flush=True)
        rows.append(values)

    rss0 = rss_bytes()
    with hedgedb.open(path, threads=1) as db:
        db.create_collection("g", kind="gaussian", dim=args.dim, match_a=1.0, match_b=5.0,
                             index=args.index)
        start = time.perf_counter()
        for first in range(0, args.items, 100000):
            n = min(100000, args.items - first)
            mean, var = draw(n)
            db.ingest("g", mean=mean, var=var,
                      ids=np.arange(first, first + n, dtype=np.int64))
        ingested = time.perf_counter() - start
        db.flush()
        flushed = time.perf_counter() - start
        stats = db.stats("g")
        report("ingest", source=args.source, dim=args.dim, items=args.items,
               seconds=round(flushed, 1),
               ingest_seconds=round(ingested, 1), items_per_second=round(args.items / flushed),
               index=stats["index_description"], nprobe=stats["index_nprobe"],
               # The fitted default candidates, the fit's final recall@10
               # estimate, stage 1's coarse recall and the fit's time (builds
               # before the fit of the candidates: 100 candidates, and the
               # estimate was the coarse recall).
               candidates=stats.get("index_candidates", 100) or 100,
               recall_estimate=stats["index_recall_estimate"],
               coarse_recall=stats.get("index_coarse_recall"),
               fit_seconds=stats.get("index_fit_seconds"),
               rss_bytes_per_item=round((rss_bytes() - rss0) / args.items))
    report("disk", bytes_per_item=round(disk_bytes(path) / args.items))

    exact = None
    for threads in (1, 2):
        start = time.perf_counter()
        db = hedgedb.open(path, threads=threads)
        db.search("g", mean=qmean[:1], var=qvar[:1], k=10, with_uncertainty=False)
        reopen = time.perf_counter() - start
        if exact is None:
            e = args.exact_queries
            exact = np.asarray(db.search("g", mean=qmean[:e], var=qvar[:e], k=10,
                                         exhaustive=True, with_uncertainty=False).ids)
        for q in range(args.queries):  # warm-up: every list and row the queries touch
            db.search("g", mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10, with_uncertainty=False)
        latencies, found = [], []
        for q in range(args.queries):
            t = time.perf_counter()
            r = db.search("g", mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10,
                          with_uncertainty=False)
            latencies.append(time.perf_counter() - t)
            found.append(np.asarray(r.ids)[0])
        start = time.perf_counter()
        for first in range(0, args.queries, 100):
            db.search("g", mean=qmean[first:first + 100], var=qvar[first:first + 100], k=10,
                      with_uncertainty=False)
        batch_qps = args.queries / (time.perf_counter() - start)
        hits = sum(len(set(found[q].tolist()) & set(exact[q].tolist()))
                   for q in range(len(exact)))
        lat = sorted(latencies)
        report("search", threads=threads, reopen_seconds=round(reopen, 2),
               p50_ms=round(1000 * statistics.median(lat), 3),
               p99_ms=round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3),
               batch_qps=round(batch_qps), recall_at_10=round(hits / exact.size, 3))
        if threads == 1 and args.sweep_nprobe:
            # Which knob limits recall at this size: the lists probed or the
            # candidates rescored.
            e = len(exact)
            for nprobe in [int(v) for v in args.sweep_nprobe.split(",")]:
                for c in [int(v) for v in args.sweep_candidates.split(",")]:
                    lat, hits = [], 0
                    for q in range(e):
                        t = time.perf_counter()
                        r = db.search("g", mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10,
                                      nprobe=nprobe, candidates=c, with_uncertainty=False)
                        lat.append(time.perf_counter() - t)
                        hits += len(set(np.asarray(r.ids)[0].tolist()) & set(exact[q].tolist()))
                    report("sweep", nprobe=nprobe, candidates=c,
                           recall_at_10=round(hits / exact.size, 3),
                           p50_ms=round(1000 * statistics.median(lat), 3))
        db.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"\nmax RSS of the process: {peak:.1f} GB")


if __name__ == "__main__":
    main()
