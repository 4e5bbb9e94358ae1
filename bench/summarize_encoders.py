#!/usr/bin/env python3
"""Markdown tables from bench/run_encoders.sh output (NAME.train.json, NAME.eval.json)."""
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "/work/bench-encoders"
names = ["point", "hib1", "hib2", "spe", "pn", "dimco"]
rows = []
for name in names:
    try:
        t = json.load(open(os.path.join(out, name + ".train.json")))
        e = json.load(open(os.path.join(out, name + ".eval.json")))
    except (OSError, ValueError):
        continue
    rows.append((name, t, e))


def f(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


print("| model | iters | train img/s | best val MAP@R | AP clean | AP corrupt | KNN clean | KNN corrupt gallery | KNN corrupt probe | R@1 clean | R@1 corrupt | MAP@R clean | MAP@R corrupt | tau KNN clean | tau KNN corrupt probe | tau AP corrupt |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for name, t, e in rows:
    v, r = e["verification"], e["retrieval"]
    tau = lambda d: d.get("eta_calibration", {}).get("kendall_tau")
    print("| " + " | ".join([
        name, str(t["iterations"]), f(t["items_per_second"], 0), f(t.get("best_validation_map_at_r")),
        f(v["clean"]["average_precision"]), f(v["corrupt"]["average_precision"]),
        f(r["clean"]["knn_accuracy"]), f(r["corrupt"]["knn_accuracy"]), f(r["corrupt_probe"]["knn_accuracy"]),
        f(r["clean"]["recall_at_1"]), f(r["corrupt"]["recall_at_1"]),
        f(r["clean"]["map_at_r"]), f(r["corrupt"]["map_at_r"]),
        f(tau(r["clean"]), 2), f(tau(r["corrupt_probe"]), 2), f(tau(v["corrupt"]), 2)]) + " |")
for name, t, e in rows:
    extra = []
    if "mean_eta" in e:
        extra.append("mean eta clean %.3f / corrupt %.3f" % (e["mean_eta"]["clean"], e["mean_eta"]["corrupt"]))
    if "dimco" in e:
        d = e["dimco"]
        if "mutual_information_bits" in d:  # reports before the batch estimate
            extra.append("factorised estimate over the whole set %.2f bits clean, %.2f corrupt (code %d bits)" % (
                d["mutual_information_bits"], d["mutual_information_bits_corrupt"], d["code_bits"]))
        else:
            b, c = d["factorised_information_batches"], d.get("factorised_information_batches_corrupt", {})
            extra.append("DIMCO eq. 6-7 on 5 x 16 balanced batches %.2f +- %.2f bits clean, %s corrupt (code %d bits)" % (
                b.get("mean_bits", float("nan")), b.get("sd_bits", float("nan")),
                "%.2f" % c["mean_bits"] if "mean_bits" in c else "-", d["code_bits"]))
    r = e["retrieval"]["clean"]
    extra.append("R@1/2/4/8 clean %s" % "/".join(f(r["recall_at_%d" % k]) for k in (1, 2, 4, 8)))
    extra.append("a=%s b=%s" % (f(t.get("match_a")), f(t.get("match_b"))) if "match_a" in t else "")
    print("- %s: %s" % (name, "; ".join(x for x in extra if x)))
