#!/usr/bin/python3
"""Two-stage search on real embeddings: HIB models on 2-item Fashion-MNIST.

From a build tree: trains a HIB model per --components value (1: Gaussian,
2: a mixture; MLP backbone, bounded wall time, fixed seed), embeds every
composite of its data (the training split clean, validation items included,
and both test splits clean and occluded), holds out --queries test
composites (their clean and occluded twins, neither in the collection),
ingests the rest into a collection made with the flags `embed` prints, and
runs `driver_engine curve` on one core: recall@10 of the exhaustive exact
top-10 against ms per query, for the default settings and a sweep of
candidates x nprobe, as a markdown table (also written to OUT/NAME.curve.md).

    bench/real_embeddings.py --build build --out build/bench-real

Every step is skipped when its output exists (delete the directory to start
over). Needs /usr/bin/python3 with NumPy and the Fashion-MNIST data set
(Debian package dataset-fashion-mnist).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np


def run(cmd, stdout=None, stderr=None):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.time()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE if stdout is None else stdout,
                         stderr=stderr, text=True)
    print("  (%.1f s)" % (time.time() - t0), file=sys.stderr, flush=True)
    return out.stdout


def last_json(text):
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def spread(prefix, kind):
    """How far apart items are, and (mog) how far apart an item's components."""
    mean, var = np.load(prefix + ".mean.npy"), np.load(prefix + ".var.npy")
    if kind == "mog":
        w = np.load(prefix + ".weights.npy")
        centre = (w[:, :, None] * mean).sum(1)
    else:
        centre = mean
    rng = np.random.default_rng(0)
    i, j = rng.choice(len(centre), 2000), rng.choice(len(centre), 2000)
    text = "# spread: median distance between the centres of random item pairs %.2f" % (
        np.median(np.linalg.norm(centre[i] - centre[j], axis=1)))
    if kind == "mog":
        sd = np.sqrt(var.sum(axis=2))
        sep = np.linalg.norm(mean[:, :, None] - mean[:, None, :], axis=3).max(axis=(1, 2))
        text += ("; an item's components: median largest distance between component means "
                 "%.2f (90th percentile %.2f), median component sqrt(trace var) %.2f, median "
                 "smallest weight %.2f" % (np.median(sep), np.percentile(sep, 90),
                                           np.median(sd), np.median(w.min(axis=1))))
    else:
        text += "; median sqrt(trace var) %.2f" % np.median(np.sqrt(var.sum(axis=1)))
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build tree (bin/hedgedb, bin/driver_engine)")
    ap.add_argument("--out", default="build/bench-real", help="working directory")
    ap.add_argument("--components", default="1,2",
                    help="HIB mixture components, one model each (1: Gaussian)")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--train-total", type=int, default=200000,
                    help="training composites (10%% become the validation split)")
    ap.add_argument("--test-total", type=int, default=28000,
                    help="composites per test split (seen, unseen; at most 30 x 1000 unseen)")
    ap.add_argument("--max-seconds", type=float, default=240, help="training wall time")
    ap.add_argument("--train-occlusion", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--queries", type=int, default=250,
                    help="held-out test composites; each gives a clean and an occluded query")
    ap.add_argument("--cpu", default="1", help="taskset CPU list of the curve")
    ap.add_argument("--knobs", default="", help="driver_engine curve --knobs (nprobe values)")
    ap.add_argument("--candidates", default="", help="driver_engine curve --candidates")
    args = ap.parse_args()

    hedgedb = os.path.join(args.build, "bin", "hedgedb")
    driver = os.path.join(args.build, "bin", "driver_engine")
    os.makedirs(args.out, exist_ok=True)
    data_flags = ["--items", "2", "--train-total", str(args.train_total), "--test-total",
                  str(args.test_total)]

    for c in [int(x) for x in args.components.split(",")]:
        name = "hib-c%d" % c
        base = os.path.join(args.out, name)
        model = base + ".model"
        # 1. Train (MLP backbone, bounded wall time, fixed seed, one torch thread).
        if not os.path.exists(model):
            with open(model + ".log", "w") as log:
                out = run([hedgedb, "train", "--method", "hib", "--components", str(c), "--dim",
                           str(args.dim), "--arch", "mlp", "--mlp-hidden", "256",
                           "--train-occlusion", str(args.train_occlusion), "--seed",
                           str(args.seed), "--threads", "1", "--iterations", "1000000",
                           "--eval-every", "2000", "--max-seconds", str(args.max_seconds),
                           "--out", model] + data_flags, stderr=log)
            with open(model + ".json", "w") as f:
                f.write(out)
        # 2. Embed every split (the model records the data flags).
        # (embed reads the training split whole, validation items included.)
        parts = [("train", False), ("test-seen", False), ("test-seen", True),
                 ("test-unseen", False), ("test-unseen", True)]
        create = None
        for split, corrupt in parts:
            prefix = "%s.%s%s" % (base, split, ".occluded" if corrupt else "")
            info = prefix + ".json"
            if not os.path.exists(info):
                out = run([hedgedb, "embed", "--model", model, "--split", split, "--threads", "1",
                           "--out", prefix] + (["--corrupt"] if corrupt else []))
                with open(info, "w") as f:
                    f.write(out)
            create = last_json(open(info).read())["create_flags"]
        kind = create["kind"]
        fields = ["mean", "var"] + (["weights"] if kind == "mog" else [])

        def load(prefix):
            arrays = {f: np.load(prefix + ".%s.npy" % f) for f in fields + ["labels"]}
            return arrays

        # 3. Items and held-out queries: a random subset of the test composites
        # (seen and unseen classes) whose clean and occluded twins both leave
        # the collection.
        items_prefix = base + ".items"
        query_prefixes = [base + ".q-clean", base + ".q-occluded"]
        if not os.path.exists(items_prefix + ".labels.npy"):
            chunks = [load(base + ".train")]
            clean = [load(base + ".test-seen"), load(base + ".test-unseen")]
            occluded = [load(base + ".test-seen.occluded"), load(base + ".test-unseen.occluded")]
            cat = lambda parts: {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}
            clean, occluded = cat(clean), cat(occluded)
            n_test = len(clean["labels"])
            rng = np.random.default_rng(args.seed)
            held = np.zeros(n_test, bool)
            held[rng.choice(n_test, args.queries, replace=False)] = True
            for q_prefix, twin in zip(query_prefixes, [clean, occluded]):
                for f in fields + ["labels"]:
                    np.save(q_prefix + ".%s.npy" % f, twin[f][held])
            for twin in (clean, occluded):
                chunks.append({f: twin[f][~held] for f in twin})
            items = cat(chunks)
            for f in fields + ["labels"]:
                np.save(items_prefix + ".%s.npy" % f, items[f])
            np.save(items_prefix + ".ids.npy", np.arange(len(items["labels"]), dtype=np.int64))
        # 4. Create the collection with the flags embed printed, ingest.
        db = base + ".db"
        if not os.path.exists(os.path.join(args.out, name + ".ingested.json")):
            shutil.rmtree(db, ignore_errors=True)
            flags = []
            for key, value in create.items():
                flags += ["--" + key, str(value)]
            run([hedgedb, "create", "--db", db, "--collection", name] + flags)
            cmd = [hedgedb, "ingest", "--db", db, "--collection", name, "--ids",
                   items_prefix + ".ids.npy", "--labels", items_prefix + ".labels.npy"]
            for f in fields:
                cmd += ["--" + f, items_prefix + ".%s.npy" % f]
            out = run(cmd)
            with open(os.path.join(args.out, name + ".ingested.json"), "w") as f:
                f.write(out)
        # 5. The curve, one core, in-process.
        cmd = ["taskset", "-c", args.cpu, driver, "curve", "--db", db, "--collection", name,
               "--queries", "clean=%s,occluded=%s" % tuple(query_prefixes)]
        if args.knobs:
            cmd += ["--knobs", args.knobs]
        if args.candidates:
            cmd += ["--candidates", args.candidates]
        out = run(cmd, stdout=subprocess.PIPE)
        with open(base + ".curve.md", "w") as f:
            f.write(out)
        print("## %s (%s)\n" % (name, kind))
        print(out)
        print(spread(items_prefix, kind) + "\n", flush=True)


if __name__ == "__main__":
    main()
