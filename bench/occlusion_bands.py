#!/usr/bin/env python3
"""Where calibration under occlusion fails: the quickstart's top-1 p against
precision@1 per band of hidden foreground, for the occluded queries and their
clean twins, with how much the query's eta rose.

Reads what scripts/quickstart.sh leaves in its work directory (default
build/quickstart): top10_clean.jsonl and top10_occluded.jsonl (query-image
--format json, the stored map's prob) and images/occluded/occlusion.csv
(export-images --corrupt: the share of each image's foreground hidden).

  /usr/bin/python3 bench/occlusion_bands.py [--work build/quickstart]

The clean twins show the map holds on clean queries in every band; the
occluded ones, at the same eta, are right less often than p says: the shift
the encoder's eta does not carry (docs/calibration.md, "When it breaks").
"""
import argparse
import csv
import json
import os
import sys


def top1(path):
    """image key (class/file) -> (top-1 prob, right?, query eta)."""
    out = {}
    with open(path) as f:
        for line in f:
            q = json.loads(line)
            key = "/".join(q["image"].split("/")[-2:])
            best = q["results"][0]
            out[key] = (best["prob"], best["label"] == q["label"], q["query_uncertainty"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="build/quickstart", help="the quickstart's work directory")
    args = ap.parse_args()
    paths = {v: os.path.join(args.work, f"top10_{v}.jsonl") for v in ("clean", "occluded")}
    hidden_csv = os.path.join(args.work, "images", "occluded", "occlusion.csv")
    for p in (*paths.values(), hidden_csv):
        if not os.path.exists(p):
            sys.exit(f"occlusion_bands: {p} is missing: run scripts/quickstart.sh first")
    clean, occluded = top1(paths["clean"]), top1(paths["occluded"])
    with open(hidden_csv) as f:
        hidden = {row["path"]: float(row["hidden_fraction"]) for row in csv.DictReader(f)}
    keys = [k for k in occluded if k in clean and k in hidden]
    if not keys:
        sys.exit("occlusion_bands: no query has both twins and a hidden fraction")
    bands = ((0.0, 0.001), (0.001, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.5), (0.5, 1.01))
    print(f"{'hidden foreground':18s} {'n':>5s} {'occluded p':>11s} {'precision':>10s} {'gap':>7s}"
          f" {'clean twin p':>13s} {'precision':>10s} {'gap':>7s} {'eta ratio':>10s}")
    for lo, hi in bands:
        ks = [k for k in keys if lo <= hidden[k] < hi]
        if not ks:
            continue
        mean = lambda xs: sum(xs) / len(xs)
        po, yo = mean([occluded[k][0] for k in ks]), mean([occluded[k][1] for k in ks])
        pc, yc = mean([clean[k][0] for k in ks]), mean([clean[k][1] for k in ks])
        ratios = sorted(occluded[k][2] / clean[k][2] for k in ks)
        median = ratios[len(ratios) // 2]
        label = f"[{lo:g}, {min(hi, 1.0):g}" + ("]" if hi > 1 else ")")
        print(f"{label:18s} {len(ks):5d} {po:11.3f} {yo:10.3f} {po - yo:+7.3f} {pc:13.3f} {yc:10.3f}"
              f" {pc - yc:+7.3f} {median:10.3f}")
    print("eta ratio: the median of the occluded query's eta over its clean twin's")


if __name__ == "__main__":
    main()
