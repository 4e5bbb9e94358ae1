#!/usr/bin/python3
"""Stage-1 recall per score: how well each coarse vector finds a score's
exact top-10, at equal candidate counts.

    PYTHONPATH=build/python /usr/bin/python3 bench/coarse_recall.py --items 100000

Items are stored with the coarse vector [mu, sqrt(tr S)] (index/vector_index.h);
a query's coarse vector is [mu_q, t], so stage 1 ranks items by
||mu_q - mu||^2 + (sqrt(tr S) - t)^2. Query sides compared:
  t = 0             ||mu_q - mu||^2 + tr S, the expected squared distance up
                    to the query's trace (csd's own order; mc's proxy);
  t = sqrt(tr S_q)  favours items as uncertain as the query;
  t = 2             a constant near this data's neighbour distance scale;
  two-pass          t = sqrt(max(0, r^2 - tr S_q)), r^2 the 10th smallest
                    ||mu_q - mu||^2 among the t = 0 pass's top-C: mls
                    prefers items with tr S_q + tr S near the squared
                    distance (d/ds of d^2/s + D ln s vanishes at D s = d^2),
                    so the second pass centres the bowl there (a second
                    stage-1 search per query);
and plain means ||mu_q - mu||^2 (what a second, means-only index would rank
by). For each: the fraction of the exact top-10 (an exhaustive hedgedb
search with the score) inside the coarse order's exact top-C (a flat scan in
NumPy, no IVF approximation), for mc, mls and csd and C = 50, 100, 200.
Then the real two-stage search (hedgedb's IVF, default nprobe) at the same
C: recall@10 against the exhaustive top-10.

Two data sets (bench/clustered_gaussians.py), D = 64, 1,000 clusters:
  uniform  the practitioner comparison's data: every item's trace is about
           the same;
  spread   items differ in total uncertainty 100-fold.
"""

import argparse
import sys
import tempfile

import numpy as np

import clustered_gaussians


def coarse_top(qmean, qvar, mean, var, c, side):
    """Each query's top-c rows by the coarse distance of `side`."""
    m64 = mean.astype(np.float64)
    norms = (m64 * m64).sum(1)
    root_trace = np.sqrt(var.astype(np.float64).sum(1))
    out = np.empty((len(qmean), c), dtype=np.int64)
    for i, (qm, qv) in enumerate(zip(qmean.astype(np.float64), qvar.astype(np.float64))):
        d = norms - 2 * m64 @ qm + qm @ qm
        if side == "t=0":
            d = d + root_trace ** 2
        elif side == "t=sqrt(tr S_q)":
            d = d + (root_trace - np.sqrt(qv.sum())) ** 2
        elif side == "t=2":
            d = d + (root_trace - 2.0) ** 2
        elif side == "two-pass":
            first = np.argpartition(d + root_trace ** 2, c)[:c]
            r2 = np.partition(d[first], min(9, c - 1))[min(9, c - 1)]
            d = d + (root_trace - np.sqrt(max(0.0, r2 - qv.sum()))) ** 2
        out[i] = np.argpartition(d, c)[:c]
    return out


def contained(cands, exact):
    return float(np.mean([len(set(e.tolist()) & set(c.tolist())) / len(e)
                          for c, e in zip(cands, exact)]))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    clustered_gaussians.add_arguments(parser)
    parser.add_argument("--data", default="uniform,spread")
    args = parser.parse_args()
    try:
        import hedgedb
    except ImportError:
        sys.exit("hedgedb is not importable: PYTHONPATH=build/python")

    sides = ["t=0", "t=sqrt(tr S_q)", "t=2", "two-pass", "means"]
    scores = ["mc", "mls", "csd"]
    cs = [50, 100, 200]
    for data in args.data.split(","):
        rng = np.random.default_rng(0)
        centres = clustered_gaussians.centers(rng, args.dim)
        mean, var = clustered_gaussians.draw(rng, centres, args.items, data == "spread")
        qmean, qvar = clustered_gaussians.draw(rng, centres, args.queries, data == "spread")
        with tempfile.TemporaryDirectory() as work, hedgedb.open(work + "/db", threads=1) as db:
            db.create_collection("g", kind="gaussian", dim=args.dim, match_a=1.0, match_b=5.0)
            db.ingest("g", mean=mean, var=var, ids=np.arange(args.items, dtype=np.int64))
            db.flush()
            stats = db.stats("g")
            exact = {s: np.asarray(db.search("g", mean=qmean, var=qvar, k=10, exhaustive=True,
                                             score=s, with_uncertainty=False).ids)
                     for s in scores}
            print(f"\n{data}: {args.items} Gaussians, D = {args.dim}, {args.queries} queries; "
                  f"index {stats['index_description']}, nprobe {stats['index_nprobe']}")
            print("\nstage-1 recall (exact top-10 inside the coarse top-C, flat scan)")
            print("| score | C | " + " | ".join(sides) + " |")
            print("|---" * (len(sides) + 2) + "|")
            tops = {(side, c): coarse_top(qmean, qvar, mean, var, c, side)
                    for side in sides for c in cs}
            for s in scores:
                for c in cs:
                    cells = [f"{contained(tops[(side, c)], exact[s]):.3f}" for side in sides]
                    print(f"| {s} | {c} | " + " | ".join(cells) + " |")
            print("\ntwo-stage search recall@10 (hedgedb's IVF, default nprobe)")
            print("| score | " + " | ".join(f"C = {c}" for c in cs) + " |")
            print("|---" * (len(cs) + 1) + "|")
            for s in scores:
                cells = []
                for c in cs:
                    got = np.asarray(db.search("g", mean=qmean, var=qvar, k=10, candidates=c,
                                               score=s, with_uncertainty=False).ids)
                    cells.append(f"{contained(got, exact[s]):.3f}")
                print(f"| {s} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
