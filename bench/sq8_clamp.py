#!/usr/bin/python3
"""What 8-bit lists cost on data the index was not trained on.

    PYTHONPATH=build/python /usr/bin/python3 bench/sq8_clamp.py

An IVF<n>,SQ8 index learns per-dimension ranges from its training sample and
clamps a value outside them. This script trains IVF16,Flat and IVF16,SQ8
collections (gaussian, D = 8) on 5,000 standard-normal means, then ingests
200 items whose means differ only in dimension 0, 30 to 60 standard
deviations out, and searches for each of them (nprobe 4, 10 candidates):
recall@10 of the two-stage search against the exhaustive top-10. The float
lists rank the outliers by their real distances; the 8-bit lists see them
all at the edge of the range, tied, and pick candidates at random among them.
"""
import sys
import tempfile

import numpy as np

import hedgedb


def main():
    rng = np.random.default_rng(1)
    train = rng.normal(size=(5000, 8)).astype(np.float32)
    outliers = np.zeros((200, 8), np.float32)
    outliers[:, 0] = np.linspace(30, 60, 200)
    var = np.full((5000, 8), 0.1, np.float32)
    ovar = np.full((200, 8), 0.1, np.float32)
    oids = np.arange(10000, 10200, dtype=np.int64)
    for factory in ("IVF16,Flat", "IVF16,SQ8"):
        with tempfile.TemporaryDirectory() as work, hedgedb.open(work + "/db", threads=1) as db:
            db.create_collection("g", kind="gaussian", dim=8, match_a=1.0, match_b=5.0,
                                 index=factory)
            db.ingest("g", mean=train, var=var, ids=np.arange(5000, dtype=np.int64))
            db.flush()
            db.search("g", mean=train[:1], var=var[:1], k=1)  # trains the index
            db.ingest("g", mean=outliers, var=ovar, ids=oids)
            db.flush()
            exact = np.asarray(db.search("g", mean=outliers, var=ovar, k=10, exhaustive=True).ids)
            found = np.asarray(db.search("g", mean=outliers, var=ovar, k=10, nprobe=4,
                                         candidates=10).ids)
            recall = np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found, exact)])
            print(f"{factory}: recall@10 {recall:.3f} on 200 items outside the trained range "
                  f"({db.stats('g')['index_description']})")


if __name__ == "__main__":
    sys.exit(main())
