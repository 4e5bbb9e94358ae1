#!/usr/bin/env python3
"""Is the calibrated probability right for every query, not just on average?

Reads the JSON lines of `hedgedb query-image --format json` (or `hedgedb
search` with `--query-labels`-style labels added by the caller: each line needs
"label", "query_uncertainty" and "results" with "prob" and "label") for one or
more named query sets, and prints, per set and per half of the set split at its
median query uncertainty eta:

  queries, mean top-1 prob, precision@1 and their gap,

then the expected calibration error of the returned top-1 and top-10 results
(15 equal-mass bins, as `hedgedb calibrate` measures it) and, for results that
carry a "in_set" flag (conformal match sets), the coverage.

Computed with NumPy from the command's output only, independently of the
library's own calibration metrics.

  scripts/calibration_by_eta.py clean=clean.jsonl occluded=occluded.jsonl [--json]
"""

import argparse
import json
import sys

import numpy as np

ECE_BINS = 15


def read_lines(path):
    queries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                q = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not a JSON line ({e})")
            if "error" in q:
                continue  # a skipped image
            for key in ("label", "query_uncertainty", "results"):
                if key not in q:
                    sys.exit(f"{path}:{number}: no '{key}' (query-image --format json over "
                             "labelled class folders gives it)")
            if any(r.get("prob") is None for r in q["results"]):
                sys.exit(f"{path}:{number}: a result has no 'prob': calibrate the collection "
                         "first (hedgedb calibrate)")
            queries.append(q)
    if not queries:
        sys.exit(f"{path}: no queries")
    return queries


def ece(probs, hits, bins=ECE_BINS):
    """Equal-mass bins over the sorted probabilities (sizes differ by at most
    one): sum of |mean p - fraction right| x bin share."""
    probs = np.asarray(probs, float)
    hits = np.asarray(hits, float)
    if probs.size == 0:
        return float("nan")
    order = np.argsort(probs, kind="stable")
    total = 0.0
    for part in np.array_split(order, min(bins, probs.size)):
        if part.size:
            total += abs(probs[part].mean() - hits[part].mean()) * part.size
    return total / probs.size


def top_k(queries, k):
    probs, hits = [], []
    for q in queries:
        for r in q["results"][:k]:
            probs.append(r["prob"])
            hits.append(float(r.get("label") == q["label"]))
    return np.array(probs), np.array(hits)


def summarize(name, queries):
    eta = np.array([q["query_uncertainty"] for q in queries], float)
    top1 = np.array([q["results"][0]["prob"] if q["results"] else np.nan for q in queries], float)
    right = np.array([float(bool(q["results"]) and q["results"][0].get("label") == q["label"])
                      for q in queries])
    median = float(np.median(eta))
    rows = []
    # Ties at the median go to the low half (stable, whatever the order).
    for half, mask in (("low eta", eta <= median), ("high eta", eta > median)):
        n = int(mask.sum())
        if n == 0:
            continue
        p = float(np.nanmean(top1[mask]))
        prec = float(right[mask].mean())
        rows.append({"set": name, "half": half, "queries": n, "mean_top1_prob": p,
                     "precision_at_1": prec, "gap": p - prec})
    out = {"set": name, "queries": len(queries), "median_eta": median, "halves": rows}
    for k in (1, 10):
        probs, hits = top_k(queries, k)
        out[f"ece_top{k}"] = ece(probs, hits)
        out[f"results_top{k}"] = int(probs.size)
    sets = [q for q in queries if any("in_set" in r for r in q["results"])]
    if sets:
        covered = [any(r.get("in_set") and r.get("label") == q["label"] for r in q["results"])
                   for q in sets]
        sizes = [sum(bool(r.get("in_set")) for r in q["results"]) for q in sets]
        out["coverage"] = float(np.mean(covered))
        out["mean_set_size"] = float(np.mean(sizes))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", metavar="NAME=FILE",
                        help="query-image --format json output of one query set")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args()
    report = []
    for item in args.sets:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"'{item}': expected NAME=FILE")
        report.append(summarize(name, read_lines(path)))
    if args.json:
        print(json.dumps(report))
        return
    print(f"{'queries':<22} {'n':>5} {'mean top-1 p':>13} {'precision@1':>12} {'gap':>7}")
    worst = 0.0
    for s in report:
        for row in s["halves"]:
            worst = max(worst, abs(row["gap"]))
            print(f"{s['set'] + ', ' + row['half']:<22} {row['queries']:>5} "
                  f"{row['mean_top1_prob']:>13.3f} {row['precision_at_1']:>12.3f} "
                  f"{row['gap']:>+7.3f}")
    print(f"worst |gap| over the halves: {worst:.3f}")
    for s in report:
        line = (f"{s['set']}: ECE of the returned top-1 {s['ece_top1']:.3f}, "
                f"of the top-10 {s['ece_top10']:.3f} ({s['results_top10']} results)")
        if "coverage" in s:
            line += f"; match-set coverage {s['coverage']:.3f}, mean set size {s['mean_set_size']:.2f}"
        print(line)


if __name__ == "__main__":
    main()
