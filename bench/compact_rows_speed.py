#!/usr/bin/python3
"""Search speed of compact rows against float32, interleaved: one collection
per row format of the real embeddings that bench/real_embeddings.py writes
(as bench/compact_rows.py builds them, default index), then --rounds rounds
in which every format in turn answers the first 200 held-out queries one per
call, in 2 batches of 100, and 10 queries in one exhaustive `l2` search.
Formats alternate within each round, so that a load that comes and goes on
a shared machine falls on all of them; the best round of each is reported.

    PYTHONPATH=build/python nice -n 19 /usr/bin/python3 bench/compact_rows_speed.py \\
        --real build/bench-real --out build/bench-compact-speed
"""
import argparse
import json
import os
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", default="build/bench-real")
    ap.add_argument("--name", default="hib-c1")
    ap.add_argument("--out", default="build/bench-compact-speed")
    ap.add_argument("--formats", default="float32,float16,bfloat16")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import hedgedb

    base = os.path.join(args.real, args.name)
    create = json.loads([l for l in open(base + ".train.json").read().splitlines()
                         if l.startswith("{")][-1])["create_flags"]
    qm = np.load(base + ".q-clean.mean.npy")[:200]
    qv = np.load(base + ".q-clean.var.npy")[:200]
    formats = args.formats.split(",")
    dbs = {}
    for fmt in formats:
        path = os.path.join(args.out, "db-" + fmt)
        if not os.path.exists(path):
            mean, var = np.load(base + ".items.mean.npy"), np.load(base + ".items.var.npy")
            with hedgedb.open(path, threads=1) as db:
                db.create_collection("c", kind=create["kind"], dim=create["dim"],
                                     match_a=create["match-a"], match_b=create["match-b"],
                                     row_format=fmt)
                db.ingest("c", mean=mean, var=var)
                db.flush()
        dbs[fmt] = hedgedb.open(path, threads=1)
        for q in range(len(qm)):  # warm-up
            dbs[fmt].search("c", mean=qm[q:q + 1], var=qv[q:q + 1], k=10, with_uncertainty=False)
    best = {f: dict(single_us=1e18, batch_us=1e18, exhaustive_l2_ms=1e18) for f in formats}
    for _ in range(args.rounds):
        for fmt in formats:
            db = dbs[fmt]
            t = time.perf_counter()
            for q in range(len(qm)):
                db.search("c", mean=qm[q:q + 1], var=qv[q:q + 1], k=10, with_uncertainty=False)
            single = (time.perf_counter() - t) / len(qm) * 1e6
            t = time.perf_counter()
            for first in range(0, len(qm), 100):
                db.search("c", mean=qm[first:first + 100], var=qv[first:first + 100], k=10,
                          with_uncertainty=False)
            batch = (time.perf_counter() - t) / len(qm) * 1e6
            t = time.perf_counter()
            db.search("c", mean=qm[:10], var=qv[:10], k=10, score="l2", exhaustive=True,
                      with_uncertainty=False)
            exhaustive = (time.perf_counter() - t) * 1e3
            b = best[fmt]
            b["single_us"] = min(b["single_us"], single)
            b["batch_us"] = min(b["batch_us"], batch)
            b["exhaustive_l2_ms"] = min(b["exhaustive_l2_ms"], exhaustive)
    print("| format | one query per call (us/query) | batches of 100 (us/query) | "
          "exhaustive l2, 10 queries (ms) |")
    print("|---|---:|---:|---:|")
    for fmt in formats:
        b = best[fmt]
        print("| %s | %.1f | %.1f | %.1f |" % (fmt, b["single_us"], b["batch_us"],
                                               b["exhaustive_l2_ms"]))
        print(json.dumps(dict(format=fmt, **{k: round(v, 2) for k, v in b.items()})))


if __name__ == "__main__":
    main()
