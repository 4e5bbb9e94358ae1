#!/usr/bin/python3
"""Compact rows (create_collection(row_format=...)) on real embeddings:
float16 and bfloat16 against float32 in one run.

Reads the items and held-out queries that bench/real_embeddings.py writes
(OUT/hib-c1.items.*, OUT/hib-c1.q-clean.*, OUT/hib-c1.q-occluded.*: HIB
Gaussians, D = 32, of 2-item Fashion-MNIST composites) and, for each
configuration (a row format, optionally @ an index factory string) in turn,
in a fresh process (one thread):

  * creates the collection with the flags `embed` printed plus the format,
    ingests every item (batches of 50,000) and flushes: the resident memory
    growth per item over that (as bench/scale_run.py measures it) and the
    database's disk bytes per item; then, in a fresh process, the resident
    memory growth per item of opening it and touching every row (an
    exhaustive search, its freed buffers returned by malloc_trim): what a
    process serving it holds;
  * recall@10 of the default two-stage search, and of an exhaustive search,
    against the exact top-10 of the float32 collection (exhaustive, computed
    in the float32 run on the first --exact-queries queries);
  * calibrates the default score on the labelled items (--max-pairs pairs)
    and measures the ECE of the calibrated top-10 probabilities of every
    held-out query (15 equal-width bins, NumPy; a hit is right when it has
    the query's label); configurations with an explicit index skip this;
  * the median and p99 latency of one query per call over --rounds passes
    of every query (after a warm-up pass), queries per second in batches of
    100 (the best of --rounds passes), and the time of an exhaustive `l2`
    search of 10 queries (the best of --rounds): the case where widening
    the rows costs most against the score's own work.

    bench/real_embeddings.py --build build --out build/bench-real --components 1
    PYTHONPATH=build/python nice -n 19 /usr/bin/python3 bench/compact_rows.py \\
        --real build/bench-real --out build/bench-compact \\
        --configs float32 float16 bfloat16 "float32@IVF1024,SQ8" "float16@IVF1024,SQ8"

Prints one JSON object per format and a Markdown table.
"""

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

from machine import disk_bytes, rss_bytes


def ece(probs, correct, bins=15):
    """Expected calibration error: sum over equal-width bins of the bin's
    share times |mean prob - accuracy|."""
    probs, correct = np.asarray(probs, np.float64).ravel(), np.asarray(correct, float).ravel()
    keep = np.isfinite(probs)
    probs, correct = probs[keep], correct[keep]
    which = np.minimum((probs * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        sel = which == b
        if sel.any():
            total += sel.mean() * abs(probs[sel].mean() - correct[sel].mean())
    return total


def load(prefix, fields):
    return {f: np.load("%s.%s.npy" % (prefix, f)) for f in fields}


def one_format(args):
    import hedgedb

    base = os.path.join(args.real, args.name)
    create = json.loads([l for l in open(base + ".train.json").read().splitlines()
                         if l.startswith("{")][-1])["create_flags"]
    items = load(base + ".items", ["mean", "var", "labels", "ids"])
    qc = load(base + ".q-clean", ["mean", "var", "labels"])
    qo = load(base + ".q-occluded", ["mean", "var", "labels"])
    qmean = np.concatenate([qc["mean"], qo["mean"]])
    qvar = np.concatenate([qc["var"], qo["var"]])
    qlabels = np.concatenate([qc["labels"], qo["labels"]])
    n = len(items["ids"])
    fmt, _, index = args.format.partition("@")
    path = os.path.join(args.out, "db-" + fmt + ("-" + index.replace(",", "_") if index else ""))
    shutil.rmtree(path, ignore_errors=True)
    out = dict(config=args.format, items=n, queries=len(qlabels))
    rss0 = rss_bytes()
    with hedgedb.open(path, threads=1) as db:
        db.create_collection("c", kind=create["kind"], dim=create["dim"],
                             match_a=create["match-a"], match_b=create["match-b"],
                             row_format=fmt, index=index)
        start = time.perf_counter()
        for first in range(0, n, 50000):
            sl = slice(first, first + 50000)
            db.ingest("c", ids=items["ids"][sl], labels=items["labels"][sl],
                      mean=items["mean"][sl], var=items["var"][sl])
        db.flush()
        out["ingest_seconds"] = round(time.perf_counter() - start, 1)
        out["rss_bytes_per_item"] = round((rss_bytes() - rss0) / n, 1)
        stats = db.stats("c")
        out["index"] = stats["index_description"]
    out["disk_bytes_per_item"] = round(disk_bytes(path) / n, 1)

    # What a process serving the collection holds, in a fresh process (this
    # one's heap has room freed by the ingest): the open (arena mapped,
    # index loaded) and every row touched once.
    serving = subprocess.run([sys.executable, __file__, "--serving", path, "--name", args.name,
                              "--real", args.real], check=True, stdout=subprocess.PIPE,
                             text=True).stdout
    out["serving_rss_bytes_per_item"] = json.loads(serving.strip().splitlines()[-1])["per_item"]
    with hedgedb.open(path, threads=1) as db:
        e = args.exact_queries
        truth_file = os.path.join(args.out, "truth.npy")
        exact = np.asarray(db.search("c", mean=qmean[:e], var=qvar[:e], k=10, exhaustive=True,
                                     with_uncertainty=False).ids)
        if args.format == "float32":  # the truth: float32, exhaustive
            np.save(truth_file, exact)
        truth = np.load(truth_file)
        out["recall10_exhaustive"] = round(
            float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, truth)])), 4)
        # Calibrated probabilities of the default score.
        if not index:
            start = time.perf_counter()
            db.calibrate("c", max_pairs=args.max_pairs)
            out["calibrate_seconds"] = round(time.perf_counter() - start, 1)
        for q in range(len(qlabels)):  # warm-up: every list and row the queries touch
            db.search("c", mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10, with_uncertainty=False)
        lat, found = [], []
        for rnd in range(args.rounds):
            for q in range(len(qlabels)):
                t = time.perf_counter()
                r = db.search("c", mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10,
                              with_uncertainty=False)
                lat.append(time.perf_counter() - t)
                if rnd == 0:
                    found.append(np.asarray(r.ids)[0])
        lat.sort()
        out["p50_ms"] = round(1000 * statistics.median(lat), 3)
        out["p99_ms"] = round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3)
        best = float("inf")
        for _ in range(args.rounds):
            start = time.perf_counter()
            for first in range(0, len(qlabels), 100):
                db.search("c", mean=qmean[first:first + 100], var=qvar[first:first + 100], k=10,
                          with_uncertainty=False)
            best = min(best, time.perf_counter() - start)
        out["batch100_qps"] = round(len(qlabels) / best, 1)
        best = float("inf")
        for _ in range(args.rounds):
            start = time.perf_counter()
            db.search("c", mean=qmean[:10], var=qvar[:10], k=10, score="l2", exhaustive=True,
                      with_uncertainty=False)
            best = min(best, time.perf_counter() - start)
        out["exhaustive_l2_10q_ms"] = round(1000 * best, 1)
        out["recall10"] = round(float(np.mean(
            [len(set(found[q].tolist()) & set(truth[q].tolist())) / 10
             for q in range(len(truth))])), 4)
        r = db.search("c", mean=qmean, var=qvar, k=10)
        ids, probs = np.asarray(r.ids), np.asarray(r.probs)
        hit_labels = items["labels"][np.clip(ids, 0, n - 1)]
        correct = (hit_labels == qlabels[:, None]) & (ids >= 0)
        out["precision_at_1"] = round(float(correct[:, 0].mean()), 4)
        if not index:
            out["ece_top10"] = round(ece(probs[ids >= 0], correct[ids >= 0]), 4)
            out["ece_top1"] = round(ece(probs[:, 0], correct[:, 0]), 4)
    shutil.rmtree(path, ignore_errors=True)
    print(json.dumps(out), flush=True)


def serving_rss(args):
    import hedgedb

    base = os.path.join(args.real, args.name)
    qmean, qvar = np.load(base + ".q-clean.mean.npy"), np.load(base + ".q-clean.var.npy")
    rss0 = rss_bytes()
    with hedgedb.open(args.serving, threads=1) as db:
        db.search("c", mean=qmean[:1], var=qvar[:1], k=10, score="l2", exhaustive=True,
                  with_uncertainty=False)
        # The exhaustive search's own buffers (scores of every item: about
        # 28 bytes per item) are freed but stay in the heap; what the process
        # holds is what is left once the allocator returns them.
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        grown = rss_bytes() - rss0
        n = db.stats("c")["items"]
    print(json.dumps(dict(per_item=round(grown / n, 1))))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", default="build/bench-real", help="real_embeddings.py's --out")
    ap.add_argument("--name", default="hib-c1")
    ap.add_argument("--out", default="build/bench-compact")
    ap.add_argument("--configs", nargs="+", default=["float32", "float16", "bfloat16"],
                    help="row formats, each optionally @ an index factory string; float32 "
                    "(the truth) first")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--exact-queries", type=int, default=100)
    ap.add_argument("--max-pairs", type=int, default=10000000)
    ap.add_argument("--format", help=argparse.SUPPRESS)  # one format, in this process
    ap.add_argument("--serving", help=argparse.SUPPRESS)  # a database to open, in this process
    args = ap.parse_args()
    if args.serving:
        serving_rss(args)
        return
    os.makedirs(args.out, exist_ok=True)
    if args.format:
        one_format(args)
        return
    rows = []
    for config in args.configs:
        cmd = [sys.executable, __file__, "--real", args.real, "--name", args.name, "--out",
               args.out, "--exact-queries", str(args.exact_queries), "--max-pairs",
               str(args.max_pairs), "--rounds", str(args.rounds), "--format", config]
        print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
        text = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows.append(json.loads(text.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    cols = ["config", "rss_bytes_per_item", "serving_rss_bytes_per_item", "disk_bytes_per_item", "recall10",
            "recall10_exhaustive", "ece_top10", "ece_top1", "precision_at_1", "p50_ms", "p99_ms",
            "batch100_qps", "exhaustive_l2_10q_ms", "ingest_seconds"]
    print("\n| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")


if __name__ == "__main__":
    main()
