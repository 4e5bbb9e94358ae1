#!/usr/bin/python3
"""Ingest and search throughput of hedgedb.dask with 1 and 2 workers, and the
memory a shard takes per item: the per-shard figures of docs/python.md's
plan for a billion items.

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_throughput.py

N Gaussian items (D = 64, clustered) are ingested in batches of 50,000 into
a ShardedCollection of S shards on a LocalCluster of S worker processes
(one thread each), flushed (index training), then searched with batches of
100 queries (k = 10, the default two-stage search). A single process with
the plain Python API is the baseline of the same run. Memory: the workers'
resident set before and after ingest, divided by the items each holds.
"""

import argparse
import os
import tempfile
import time

import numpy as np

import hedgedb
from hedgedb.dask import ShardedCollection


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def median_latency(search, queries=100):
    """Median seconds of a one-query search, over `queries` queries."""
    times = []
    for q in range(queries):
        start = time.perf_counter()
        search(q)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def make(n, d, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(2000, d)).astype(np.float32)
    labels = rng.integers(0, 2000, size=n)
    mean = (centers[labels] + 0.3 * rng.normal(size=(n, d))).astype(np.float32)
    var = rng.uniform(0.02, 0.2, size=(n, d)).astype(np.float32)
    return mean, var, labels


def run_single(work, mean, var, labels, queries, batch, k):
    with hedgedb.open(work + "/single") as db:
        db.create_collection("g", kind="gaussian", dim=mean.shape[1], seed=7)
        start = time.perf_counter()
        for first in range(0, len(mean), batch):
            db.ingest("g", ids=np.arange(first, min(first + batch, len(mean))),
                      mean=mean[first:first + batch], var=var[first:first + batch],
                      labels=labels[first:first + batch])
        db.flush()
        ingest = len(mean) / (time.perf_counter() - start)
        start = time.perf_counter()
        for first in range(0, queries, 100):
            db.search("g", mean=mean[first:first + 100], var=var[first:first + 100], k=k)
        search = queries / (time.perf_counter() - start)
        latency = median_latency(lambda q: db.search("g", mean=mean[q:q + 1], var=var[q:q + 1],
                                                     k=k))
    return ingest, search, latency


def run_sharded(work, shards, mean, var, labels, queries, batch, k):
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=shards, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=40)
    with Client(cluster) as client:
        before = client.run(rss_bytes)
        sharded = ShardedCollection.create(client, work + f"/s{shards}", "g", shards=shards,
                                           kind="gaussian", dim=mean.shape[1], seed=7)
        start = time.perf_counter()
        for first in range(0, len(mean), batch):
            sharded.ingest(ids=np.arange(first, min(first + batch, len(mean))),
                           mean=mean[first:first + batch], var=var[first:first + batch],
                           labels=labels[first:first + batch])
        sharded.flush()
        ingest = len(mean) / (time.perf_counter() - start)
        after = client.run(rss_bytes)
        start = time.perf_counter()
        for first in range(0, queries, 100):
            sharded.search(mean=mean[first:first + 100], var=var[first:first + 100], k=k)
        search = queries / (time.perf_counter() - start)
        latency = median_latency(lambda q: sharded.search(mean=mean[q:q + 1], var=var[q:q + 1],
                                                          k=k))
        per_item = sum(after[w] - before[w] for w in after) / len(mean)
        sharded.close()
    cluster.close()
    return ingest, search, latency, per_item


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=400000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=50000)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    mean, var, labels = make(args.items, args.dim)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        ingest, search, latency = run_single(work, mean, var, labels, args.queries, args.batch,
                                             args.k)
        rows.append(("1 process, no Dask (baseline)", ingest, search, latency, None))
        for shards in (1, 2):
            rows.append((f"Dask, {shards} worker(s) = shard(s)",) + run_sharded(
                work, shards, mean, var, labels, args.queries, args.batch, args.k))
    print(f"{args.items} Gaussian items, D = {args.dim}, batches of {args.batch}, "
          f"{args.queries} queries in batches of 100, k = {args.k}")
    print("| setup | ingest items/s | search queries/s (batches of 100) "
          "| one-query latency (median) | worker RSS per item |")
    print("|---|---|---|---|---|")
    for name, ingest, search, latency, per_item in rows:
        memory = "-" if per_item is None else f"{per_item:.0f} B"
        print(f"| {name} | {ingest:,.0f} | {search:,.0f} | {latency * 1e3:.2f} ms | {memory} |")


if __name__ == "__main__":
    main()
