#!/usr/bin/env python3
"""Is the calibrated probability right for every query, not just on average?

Reads the JSON lines of `hedgedb query-image --format json` (or `hedgedb
search` with `--query-labels`-style labels added by the caller: each line needs
"label", "query_uncertainty" and "results" with "prob" and "label") for one or
more named query sets, and prints, per set and per half of the set split at its
median query uncertainty eta:

  queries, mean top-1 prob, precision@1 and their gap,

then the expected calibration error of the returned top-1 and top-10 results
(15 equal-mass bins, as `hedgedb calibrate` measures it). With --sets
NAME=FILE, the output of `query-image --coverage C --format json` (each
query's results are its conformal match set), it prints per set the measured
coverage (the share of queries whose set holds a same-label item), per eta
half too, and the mean set size. With --false-match NAME=FILE, the output of
`query-image --max-false-match-rate R --format json`, and --gallery DIR (the
collection's images in class folders), it prints the realised false-match
rate: the non-matching results returned over every non-matching (query,
gallery image) pair.

Computed with NumPy from the command's output only, independently of the
library's own calibration metrics.

  scripts/calibration_by_eta.py clean=clean.jsonl occluded=occluded.jsonl \
      [--sets clean=clean_sets.jsonl ...] \
      [--false-match clean=clean_fmr.jsonl ... --gallery GALLERY_DIR] [--json]
"""

import argparse
import json
import os
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
    return out


def coverage(name, queries):
    """Conformal match sets: the results of each query are its set."""
    eta = np.array([q["query_uncertainty"] for q in queries], float)
    covered = np.array([any(r.get("label") == q["label"] for r in q["results"])
                        for q in queries], float)
    sizes = np.array([len(q["results"]) for q in queries], float)
    median = float(np.median(eta))
    halves = {half: float(covered[mask].mean())
              for half, mask in (("low eta", eta <= median), ("high eta", eta > median))
              if mask.any()}
    return {"set": name, "queries": len(queries), "coverage": float(covered.mean()),
            "coverage_by_half": halves, "mean_set_size": float(sizes.mean())}


def false_match(name, queries, gallery_counts):
    """Realised false-match rate of threshold searches against a gallery
    whose label counts are known."""
    total = sum(gallery_counts.values())
    returned = sum(sum(r.get("label") != q["label"] for r in q["results"]) for q in queries)
    pairs = sum(total - gallery_counts.get(q["label"], 0) for q in queries)
    return {"set": name, "queries": len(queries), "false_matches": int(returned),
            "non_matching_pairs": int(pairs), "false_match_rate": returned / pairs,
            "mean_results": float(np.mean([len(q["results"]) for q in queries]))}


def gallery_label_counts(root):
    """Images per class folder (the folder name is the label)."""
    counts = {}
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        if os.path.isdir(path):
            try:
                label = int(entry)
            except ValueError:
                sys.exit(f"{path}: class folders must be named by their integer label")
            counts[label] = sum(1 for f in os.listdir(path) if not f.startswith("."))
    if not counts:
        sys.exit(f"{root}: no class folders")
    return counts


def named_files(items, parser):
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"'{item}': expected NAME=FILE")
        out.append((name, path))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", metavar="NAME=FILE",
                        help="query-image --format json output of one query set")
    parser.add_argument("--sets", nargs="+", default=[], metavar="NAME=FILE", dest="match_sets",
                        help="query-image --coverage C --format json output (conformal sets)")
    parser.add_argument("--false-match", nargs="+", default=[], metavar="NAME=FILE",
                        help="query-image --max-false-match-rate R --format json output")
    parser.add_argument("--gallery", metavar="DIR",
                        help="the collection's images in class folders (for --false-match)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args()
    if args.false_match and not args.gallery:
        parser.error("--false-match needs --gallery")
    report = [summarize(name, read_lines(path)) for name, path in named_files(args.sets, parser)]
    sets = [coverage(name, read_lines(path)) for name, path in named_files(args.match_sets, parser)]
    counts = gallery_label_counts(args.gallery) if args.false_match else {}
    rates = [false_match(name, read_lines(path), counts)
             for name, path in named_files(args.false_match, parser)]
    if args.json:
        print(json.dumps(report + sets + rates))
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
        print(line)
    for c in sets:
        halves = ", ".join(f"{h} {v:.3f}" for h, v in c["coverage_by_half"].items())
        print(f"{c['set']}: match-set coverage {c['coverage']:.3f} ({halves}), "
              f"mean set size {c['mean_set_size']:.1f} ({c['queries']} queries)")
    for f in rates:
        print(f"{f['set']}: realised false-match rate {f['false_match_rate']:.5f} "
              f"({f['false_matches']} of {f['non_matching_pairs']} non-matching pairs; "
              f"{f['mean_results']:.1f} results a query)")


if __name__ == "__main__":
    main()
