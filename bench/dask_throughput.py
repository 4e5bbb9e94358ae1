#!/usr/bin/python3
"""Ingest and search throughput of hedgedb.dask with 1 and 2 workers (or
--shards), and the memory a shard takes per item: the per-shard figures of
docs/python.md's plan for a billion items.

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_throughput.py

N Gaussian items (D = 64, clustered) are ingested in batches of 50,000 into
a ShardedCollection of S shards on a LocalCluster of S worker processes
(one thread each), flushed (index training), then searched with batches of
100 queries (k = 10, the default two-stage search, or --nprobe and
--candidates). A single process with the plain Python API is the baseline
of the same run (--no-single skips it). Memory: the workers' resident set
before and after ingest, divided by the items each holds. The items are
made a batch at a time (the driver never holds them all), the same batches
for every setup.

Ten million items over four shards (issue 34's item 4):

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_throughput.py \\
        --items 10000000 --shards 4 --no-single --index IVF4096,Flat \\
        --nprobe 16 --candidates 400 --kill

--kill: after the measurements of the last setup, batch searches are
started and shard 1's worker process is killed while they run; the search
must raise hedgedb.Error naming shard 1 (docs/python.md, "Dask"), and the
seconds from the kill to the error are printed.
"""

import argparse
import os
import signal
import tempfile
import threading
import time

import numpy as np

from machine import rss_bytes

import hedgedb
from hedgedb.dask import ShardedCollection


def median_latency(search, queries=100):
    """Median seconds of a one-query search, over `queries` queries."""
    times = []
    for q in range(queries):
        start = time.perf_counter()
        search(q)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


class Data:
    """Clustered Gaussians made a batch at a time: the batch that starts at
    `first` is the same whenever it is asked for (its own seeded generator)."""

    def __init__(self, d, seed=0):
        self.d, self.seed = d, seed
        self.centers = np.random.default_rng(seed).normal(size=(2000, d)).astype(np.float32)

    def batch(self, first, n):
        rng = np.random.default_rng([self.seed, first])
        labels = rng.integers(0, 2000, size=n)
        mean = (self.centers[labels] + 0.3 * rng.normal(size=(n, self.d))).astype(np.float32)
        var = rng.uniform(0.02, 0.2, size=(n, self.d)).astype(np.float32)
        return mean, var, labels


def ingest_all(ingest, data, items, batch):
    for first in range(0, items, batch):
        mean, var, labels = data.batch(first, min(batch, items - first))
        ingest(ids=np.arange(first, first + len(mean)), mean=mean, var=var, labels=labels)


def run_single(work, data, args, knobs):
    qmean, qvar, _ = data.batch(0, args.queries)
    with hedgedb.open(work + "/single") as db:
        db.create_collection("g", kind="gaussian", dim=data.d, seed=7, index=args.index)
        start = time.perf_counter()
        ingest_all(lambda **a: db.ingest("g", **a), data, args.items, args.batch)
        db.flush()
        ingest = args.items / (time.perf_counter() - start)
        start = time.perf_counter()
        for first in range(0, args.queries, 100):
            db.search("g", mean=qmean[first:first + 100], var=qvar[first:first + 100], k=args.k,
                      **knobs)
        search = args.queries / (time.perf_counter() - start)
        latency = median_latency(lambda q: db.search("g", mean=qmean[q:q + 1], var=qvar[q:q + 1],
                                                     k=args.k, **knobs))
    return ingest, search, latency


def kill_mid_search(client, workers, sharded, qmean, qvar, k, knobs):
    """Runs batch searches, kills shard 1's worker while they run: the
    seconds from the kill until the search raised, and the error's text."""
    pids = client.run(os.getpid)
    outcome = {}

    def search():
        try:
            for _ in range(100000):
                sharded.search(mean=qmean[:100], var=qvar[:100], k=k, **knobs)
            outcome["error"] = None
        except hedgedb.Error as e:
            outcome["error"] = e
        outcome["at"] = time.perf_counter()

    thread = threading.Thread(target=search)
    thread.start()
    time.sleep(1.0)
    killed_at = time.perf_counter()
    os.kill(pids[workers[1]], signal.SIGKILL)
    thread.join()
    error = outcome["error"]
    if error is None or "shard 1" not in str(error):
        raise SystemExit(f"killing shard 1's worker mid-search gave {error!r}, not the "
                         "documented hedgedb.Error naming shard 1")
    return outcome["at"] - killed_at, str(error)


def run_sharded(work, shards, data, args, knobs, kill):
    from dask.distributed import Client, LocalCluster

    qmean, qvar, _ = data.batch(0, args.queries)
    cluster = LocalCluster(n_workers=shards, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=40)
    killed = None
    with Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        before = client.run(rss_bytes)
        sharded = ShardedCollection.create(client, work + f"/s{shards}", "g", shards=shards,
                                           workers=workers, kind="gaussian", dim=data.d, seed=7,
                                           index=args.index)
        start = time.perf_counter()
        ingest_all(sharded.ingest, data, args.items, args.batch)
        sharded.flush()
        ingest = args.items / (time.perf_counter() - start)
        after = client.run(rss_bytes)
        start = time.perf_counter()
        for first in range(0, args.queries, 100):
            sharded.search(mean=qmean[first:first + 100], var=qvar[first:first + 100], k=args.k,
                           **knobs)
        search = args.queries / (time.perf_counter() - start)
        latency = median_latency(lambda q: sharded.search(mean=qmean[q:q + 1],
                                                          var=qvar[q:q + 1], k=args.k, **knobs))
        per_item = sum(after[w] - before[w] for w in after) / args.items
        if kill:
            killed = kill_mid_search(client, workers, sharded, qmean, qvar, args.k, knobs)
        sharded.close()
    cluster.close()
    return (ingest, search, latency, per_item), killed


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=400000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=50000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--shards", default="1,2",
                        help="comma-separated shard counts, one setup each (default 1,2)")
    parser.add_argument("--no-single", action="store_true",
                        help="skip the one-process baseline")
    parser.add_argument("--index", default="", help="FAISS factory string (default: the "
                        "collection's default)")
    parser.add_argument("--nprobe", type=int, default=0, help="search knob (0: fitted)")
    parser.add_argument("--candidates", type=int, default=0, help="search knob (0: default)")
    parser.add_argument("--kill", action="store_true",
                        help="kill shard 1's worker mid-search in the last setup (>= 2 shards)")
    args = parser.parse_args()
    shard_counts = [int(v) for v in args.shards.split(",")]
    if args.kill and shard_counts[-1] < 2:
        parser.error("--kill needs at least 2 shards in the last setup")
    knobs = {}
    if args.nprobe:
        knobs["nprobe"] = args.nprobe
    if args.candidates:
        knobs["candidates"] = args.candidates
    data = Data(args.dim)
    rows, killed = [], None
    with tempfile.TemporaryDirectory() as work:
        if not args.no_single:
            ingest, search, latency = run_single(work, data, args, knobs)
            rows.append(("1 process, no Dask (baseline)", ingest, search, latency, None))
        for i, shards in enumerate(shard_counts):
            figures, killed = run_sharded(work, shards, data, args, knobs,
                                          args.kill and i == len(shard_counts) - 1)
            rows.append((f"Dask, {shards} worker(s) = shard(s)",) + figures)
    print(f"{args.items} Gaussian items, D = {args.dim}, batches of {args.batch}, "
          f"{args.queries} queries in batches of 100, k = {args.k}"
          + (f", index {args.index}" if args.index else "")
          + (f", knobs {knobs}" if knobs else ""))
    print("| setup | ingest items/s | search queries/s (batches of 100) "
          "| one-query latency (median) | worker RSS per item |")
    print("|---|---|---|---|---|")
    for name, ingest, search, latency, per_item in rows:
        memory = "-" if per_item is None else f"{per_item:.0f} B"
        print(f"| {name} | {ingest:,.0f} | {search:,.0f} | {latency * 1e3:.2f} ms | {memory} |")
    if killed is not None:
        print(f"\nshard 1's worker killed mid-search: hedgedb.Error after {killed[0]:.2f} s: "
              f"{killed[1]}")


if __name__ == "__main__":
    main()
