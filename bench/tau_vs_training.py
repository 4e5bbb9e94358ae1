#!/usr/bin/python3
"""Kendall's tau of eta against training progress (issue 33: our KNN taus
sit above HIB Table 2's, and our models saw 36,000 of its 500,000
iterations; does tau fall as training goes on?).

    HEDGEDB_MNIST_DIR=DIR /usr/bin/python3 bench/tau_vs_training.py --dir CKPTS \\
        --hedgedb OUT/bin/hedgedb --seed 2

CKPTS holds copies of a training's checkpoint weights named NAME-ITER.model
(e.g. hib1-s2-8000.model, kept while the reproduction trains). Each is
evaluated once as bench/reproduce_papers.py evaluates a model (`evaluate
--protocol hib-table2 --pairs 10000 --mc-repeats 3`, the seed given) into
NAME-ITER.eval.json; a report that exists is kept, so a report of the
finished model copied in as NAME-ITER.eval.json joins the series. Then it
writes CKPTS/tau_vs_training.md (per NAME, one row per ITER: KNN accuracy,
the taus of KNN clean and against the corrupt gallery over equal-count and
equal-width bins, the AP taus, the error-versus-reject area) and
CKPTS/tau_vs_training.png.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

from reproduce_papers import get  # a report's number at a dotted path (the mean over repeats)

NAME_ITER = re.compile(r"^(?P<name>.+)-(?P<iter>\d+)\.(?:model|eval\.json)$")

# (column, report path).
COLUMNS = [("KNN clean", "retrieval.clean.knn_accuracy"),
           ("tau KNN clean", "retrieval.clean.eta_calibration.kendall_tau"),
           ("tau KNN clean, equal width", "retrieval.clean.eta_calibration.equal_width.kendall_tau"),
           ("tau KNN corrupt gallery", "retrieval.corrupt.eta_calibration.kendall_tau"),
           ("tau KNN corrupt gallery, equal width", "retrieval.corrupt.eta_calibration.equal_width.kendall_tau"),
           ("tau AP clean", "verification.clean.eta_calibration.kendall_tau"),
           ("tau AP corrupt", "verification.corrupt.eta_calibration.kendall_tau"),
           ("ERC R@1 clean", "retrieval.clean.eta_calibration.erc_area")]


def series(directory):
    """{name: {iteration: (model path or None, report path or None)}}."""
    found = {}
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        m = NAME_ITER.match(os.path.basename(path))
        if m:
            entry = found.setdefault(m.group("name"), {}).setdefault(int(m.group("iter")), [None, None])
            entry[0 if path.endswith(".model") else 1] = path
    return found


def evaluate(args, model, report):
    cmd = [args.hedgedb, "evaluate", "--data", args.data, "--items", str(args.items), "--composite-layout",
           args.composite_layout, "--model", model, "--protocol", "hib-table2", "--pairs", "10000",
           "--seed", str(args.seed), "--threads", "1", "--mc-repeats", str(args.mc_repeats)]
    print("evaluating %s" % model, flush=True)
    with open(report + ".tmp", "w") as out, open(report[:-len(".json")] + ".log", "w") as log:
        done = subprocess.run(cmd, stdout=out, stderr=log)
    if done.returncode != 0:
        os.remove(report + ".tmp")
        sys.exit("evaluate failed (exit %d) on %s: see %s" % (done.returncode, model,
                                                              report[:-len(".json")] + ".log"))
    os.replace(report + ".tmp", report)


def fmt(x):
    return "-" if x is None else "%.3f" % x


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="the checkpoint copies NAME-ITER.model")
    parser.add_argument("--hedgedb", default="build/bin/hedgedb")
    parser.add_argument("--seed", type=int, required=True, help="the training's seed (evaluate --seed)")
    parser.add_argument("--data", default="mnist")
    parser.add_argument("--items", type=int, default=2)
    parser.add_argument("--composite-layout", default="hib-scaled")
    parser.add_argument("--mc-repeats", type=int, default=3)
    parser.add_argument("--summarize-only", action="store_true", help="evaluate nothing; tabulate the reports")
    args = parser.parse_args()
    found = series(args.dir)
    if not found:
        sys.exit("no NAME-ITER.model or NAME-ITER.eval.json in %s" % args.dir)
    for name, points in sorted(found.items()):
        for iteration, entry in sorted(points.items()):
            if entry[1] is None and entry[0] is not None and not args.summarize_only:
                entry[1] = os.path.join(args.dir, "%s-%d.eval.json" % (name, iteration))
                evaluate(args, entry[0], entry[1])
    lines = ["# Kendall's tau of eta against training iterations", "",
             "`evaluate --protocol hib-table2 --pairs 10000 --seed %d --mc-repeats %d` of each checkpoint copy "
             "(means over the repeats); \"equal width\": the same tau over bins of equal eta width." % (
                 args.seed, args.mc_repeats), ""]
    curves = {}
    for name, points in sorted(found.items()):
        lines += ["## " + name, "", "| iteration | " + " | ".join(c for c, _ in COLUMNS) + " |",
                  "|---" * (1 + len(COLUMNS)) + "|"]
        for iteration, (_, report) in sorted(points.items()):
            if report is None:
                continue
            with open(report) as f:
                r = json.load(f)
            row = [x if isinstance(x, (int, float)) else None for x in (get(r, path) for _, path in COLUMNS)]
            curves.setdefault(name, []).append((iteration, row))
            lines.append("| %d | %s |" % (iteration, " | ".join(fmt(x) for x in row)))
        lines.append("")
    path = os.path.join(args.dir, "tau_vs_training.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print("wrote " + path)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, pair, title in ((axes[0], (1, 2), "clean gallery"), (axes[1], (3, 4), "corrupt gallery")):
        for k, (name, points) in enumerate(sorted(curves.items())):
            xs = [i for i, _ in points]
            for j, style in zip(pair, ("-", ":")):
                ys = [row[j] if row[j] is not None else float("nan") for _, row in points]
                ax.plot(xs, ys, style, marker="o", color=plt.get_cmap("tab10")(k % 10),
                        label="%s, %s bins" % (name, "equal-count" if style == "-" else "equal-width"))
        ax.set_title("Kendall's tau of eta, KNN, clean probes, %s" % title)
        ax.set_xlabel("training iterations")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("tau (positive: accuracy falls as eta grows)")
    fig.tight_layout()
    png = os.path.join(args.dir, "tau_vs_training.png")
    fig.savefig(png, dpi=100)
    plt.close(fig)
    print("wrote " + png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
