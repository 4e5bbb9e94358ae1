#!/usr/bin/python3
"""The CUB-200-2011 / Cars-196 retrieval benchmark in one command.

    /usr/bin/python3 scripts/benchmark.py --cub /data/CUB_200_2011 --out runs/cub
    /usr/bin/python3 scripts/benchmark.py --cars /data/stanford_cars --out runs/cars \\
        --recipe resnet50.pt --image-size 224 --bbox --minutes 600

Steps (each an ordinary hedgedb command, echoed to stderr):
  1. train a model on the training classes (skipped when OUT/model.hdbm or
     --model exists), with a recipe: cnn (the built-in CNN), mlp, or a
     TorchScript backbone file (scripts/export_backbone.py) fine-tuned with
     the head; --minutes bounds the training time;
  2. `evaluate --protocol benchmark`: recall@1/2/4/8 and MAP@R of every test
     image against the others, with K = 64 Monte Carlo samples and 3 repeats
     (mean and sd);
  3. `ingest-images` the test split into OUT/db, and `query-image
     --exclude-self --exhaustive` every test image against it: the same
     numbers through the database (its first Monte Carlo draw);
  4. prints a table with the number of queries, and writes OUT/summary.json.

Re-running it gives the same numbers and the same collection: the model
exists, and ingest-images skips the images the collection holds. Arguments
after `--` go to `hedgedb train`.
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[1]

# Published recall@1 (%) to compare with, all from ImageNet-pretrained
# backbones: DIMCO (its Table 4, ResNet-50), Proxy-Anchor (Kim et al.,
# CVPR 2020, ResNet-50, 512 dimensions).
PUBLISHED = {
    "cub": [("DIMCO (k, d) = (256, 256), 2048 bits", 58.90),
            ("Proxy-Anchor, ResNet-50, 512-D", 69.9)],
    "cars": [("DIMCO (k, d) = (256, 256), 2048 bits", 77.32),
             ("Proxy-Anchor, ResNet-50, 512-D", 87.7)],
}


def hedgedb(binary, args, cwd):
    print("$ hedgedb " + " ".join(args), file=sys.stderr, flush=True)
    result = subprocess.run([binary] + args, cwd=cwd, stdout=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(f"benchmark: hedgedb {args[0]} failed (exit {result.returncode})")
    return json.loads(result.stdout.strip().splitlines()[-1])


def mean_sd(value):
    """A number, or {mean, sd, repeats} when it varied over Monte Carlo repeats."""
    if isinstance(value, dict):
        return value["mean"], value["sd"]
    return value, 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cub", help="CUB-200-2011 root (images.txt, ..., images/)")
    source.add_argument("--cars", help="Cars-196 root (cars_annos.mat, car_ims/)")
    parser.add_argument("--out", required=True, help="directory for the model, database, reports")
    parser.add_argument("--model", help="a trained model file (default: OUT/model.hdbm)")
    parser.add_argument("--recipe", default="cnn",
                        help="cnn, mlp, or a TorchScript backbone file (default: cnn)")
    parser.add_argument("--method", default="hib", help="train --method (default: hib)")
    parser.add_argument("--dim", default="64", help="train --dim (default: 64)")
    parser.add_argument("--image-size", default="64", help="train --image-size (default: 64)")
    parser.add_argument("--bbox", action="store_true", help="crop to the annotated boxes")
    parser.add_argument("--class-split", default="0",
                        help="classes 1..K train (0: the official split)")
    parser.add_argument("--minutes", type=float, default=30, help="training time (default: 30)")
    parser.add_argument("--threads", default="0", help="torch threads (0: all cores)")
    parser.add_argument("--bins", default="20",
                        help="evaluate --bins: uncertainty bins (fewer for tiny test splits)")
    parser.add_argument("--hedgedb", default=os.environ.get(
        "HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb")))
    parser.add_argument("train_extra", nargs="*", help="after --: more `hedgedb train` flags")
    args = parser.parse_args()

    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data_set = "cub" if args.cub else "cars"
    root = str(pathlib.Path(args.cub or args.cars).resolve())
    model = str(pathlib.Path(args.model).resolve()) if args.model else str(out / "model.hdbm")
    threads = [] if args.threads == "0" else ["--threads", args.threads]

    if not os.path.exists(model):
        # Defaults that a flag after `--` replaces (hedgedb takes a flag once).
        given = {a for a in args.train_extra if a.startswith("--")}
        defaults = [("--val-fraction", "0.1"), ("--iterations", "1000000"),
                    ("--max-seconds", str(args.minutes * 60))]
        train = ["train", f"--{data_set}", root, "--class-split", args.class_split,
                 "--image-size", args.image_size, "--method", args.method, "--dim", args.dim,
                 "--out", model]
        for flag, value in defaults:
            # --epochs and --budget-items set the run's length as --iterations does.
            length_given = flag == "--iterations" and given & {"--epochs", "--budget-items"}
            if flag not in given and not length_given:
                train += [flag, value]
        if args.bbox:
            train.append("--bbox")
        if args.recipe in ("cnn", "mlp"):
            train += ["--arch", args.recipe]
        else:
            train += ["--backbone", str(pathlib.Path(args.recipe).resolve())]
        trained = hedgedb(args.hedgedb, train + threads + args.train_extra, out)
        (out / "train.json").write_text(json.dumps(trained) + "\n")
        # A new model embeds into a new space: the old collection goes.
        shutil.rmtree(out / "db", ignore_errors=True)

    # The model carries its settings (image size, boxes, class split); the
    # root is named so that evaluate, ingest and query read the same data
    # (a model trained on another data set or with other flags is refused).
    report = hedgedb(args.hedgedb,
                     ["evaluate", "--model", model, f"--{data_set}", root, "--protocol", "benchmark",
                      "--bins", args.bins] + threads, out)
    (out / "evaluate.json").write_text(json.dumps(report) + "\n")
    ingest = hedgedb(args.hedgedb, ["ingest-images", "--db", str(out / "db"), "--collection",
                                    "test", "--model", model, f"--{data_set}", root,
                                    "--no-progress"] + threads, out)
    database = hedgedb(args.hedgedb, [
        "query-image", "--db", str(out / "db"), "--collection", "test", "--model", model,
        f"--{data_set}", root, "--exclude-self", "--exhaustive", "--samples", "64", "--k", "8",
        "--format", "summary", "--no-progress"] + threads, out)

    clean = report["retrieval"]["clean"]
    rows = []
    for key, name in (("recall_at_1", "recall@1"), ("recall_at_2", "recall@2"),
                      ("recall_at_4", "recall@4"), ("recall_at_8", "recall@8"),
                      ("map_at_r", "MAP@R")):
        mean, sd = mean_sd(clean[key])
        rows.append({"metric": name, "mean": mean, "sd": sd, "database": database.get(key)})
    summary = {
        "data_set": data_set, "root": root, "model": model,
        "queries": report["items"], "split_items": report["split_items"],
        "samples": report["samples"], "mc_repeats": report["mc_repeats"],
        "collection_items": ingest["ingested"] + ingest["already_present"],
        "database_queries": database["labelled_queries"],
        "metrics": rows,
        "published_recall_at_1": [{"method": m, "percent": p} for m, p in PUBLISHED[data_set]],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    print(f"{data_set}: {report['items']} test queries (of {report['split_items']}), "
          f"K = {report['samples']} Monte Carlo samples, {report['mc_repeats']} repeats; "
          f"model {model}")
    print("| metric | evaluate (mean +- sd over repeats) | database (query-image) |")
    print("|---|---|---|")
    for row in rows:
        db = "-" if row["database"] is None else f"{row['database']:.4f}"
        print(f"| {row['metric']} | {row['mean']:.4f} +- {row['sd']:.4f} | {db} |")
    print("published recall@1 (ImageNet-pretrained): " +
          "; ".join(f"{m} {p:.1f}%" for m, p in PUBLISHED[data_set]))


if __name__ == "__main__":
    main()
