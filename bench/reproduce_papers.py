#!/usr/bin/env python3
"""The papers' encoder claims, measured on N-item composites (of Fashion-MNIST
by default; --data mnist for MNIST digits, --composite-layout for HIB's
Table 3 sizes).

Trains every model of the reproduction for BUDGET seconds of wall time per
seed, evaluates it with a paper protocol of `hedgedb evaluate`, and writes:

  OUT/tables.md        every metric, mean +- sd over the seeds, per model
  OUT/side_by_side.md  HIB Tables 1, 2, 5 and SPE Table 2 side by side: for
                       every N x D cell and model of the run, the paper's
                       figure, ours (mean +- sd) and the difference
  OUT/claims.md        each claim of the papers: the paper's number, ours,
                       a verdict (holds / does not hold / within noise)
  OUT/ellipses.png     HIB Figure 3: 2-D Gaussian embeddings of clean and
                       corrupt test composites as 3-sd ellipses
  OUT/*.extra.json     per model, one more evaluation (one Monte Carlo repeat,
                       --extra-items test items)
                       with --disentanglement, for point models --pq at
                       DIMCO's 16 bits, for SPE, PN and point --episodes 1000
  (tables.md also holds, per probabilistic model, Kendall's tau of eta next
  to the error-versus-reject area of recall@1 by eta, its oracle and chance;
  claims.md asks whether that area is below chance)
  OUT/uncertainty.png  KNN accuracy of the inputs kept against the share of
                       the most uncertain dropped (eta), per model
  OUT/eta_bins.png     HIB Figure 5 for Table 2's KNN taus: KNN accuracy per
                       eta bin, equal-count and equal-width bins, per model
  OUT/learning_curves.png  validation MAP@R against the training images seen
                       (train --eval-every), per cell, model and seed; tables.md
                       gives the gain over the last third of each training

A run is resumable: a model or evaluation whose JSON exists is not redone,
so a larger budget needs a new OUT. The binary and its libraries are copied
into OUT/bin first, so rebuilding the tree does not change a running
reproduction. Needs python3-numpy and python3-matplotlib (Debian).

  bench/reproduce_papers.py --build build --out /tmp/repro --budget 60
  bench/reproduce_papers.py --out /tmp/repro --summarize-only

The papers' own setting (issue 33) trains a fixed number of iterations with
each paper's preset (--presets: hib-ndigit for point, contrastive and the
HIB models, spe-ndigit for spe and pn; --setup then applies to the models
without one), --jobs trainings at a time, each checkpointed every 10 minutes
and resumed from its checkpoint when the command is run again after a stop:

  bench/reproduce_papers.py --out DIR --data mnist --composite-layout hib-scaled \
      --presets --setup "" --iterations 36000 --jobs 2 --models point,hib1,hib2

bench/RESULTS.md ("Paper reproduction") holds a run and its command.
"""
import argparse
import filecmp
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time

# name -> (train flags, whether --dim applies). The paper each tests:
#   point, contrastive: HIB appendix B (soft vs margin contrastive loss)
#   hib1, hib2:         HIB Table 1/2 (MoG-1, MoG-2); hib1-beta0: Table 5
#   spe, pn:            SPE against the prototypical network
#   dimco, fstat:       the discrete codes and the F-statistic loss
MODELS = {
    "point": ("--method point", True),
    "contrastive": ("--method contrastive", True),
    "hib1": ("--method hib --components 1", True),
    "hib2": ("--method hib --components 2", True),
    "hib1-beta0": ("--method hib --components 1 --beta 0", True),
    "spe": ("--method spe", True),
    "pn": ("--method pn", True),
    "dimco": ("--method dimco", False),
    "fstat": ("--method fstat", False),
    "fstat-d30": ("--method fstat --top-dims 30", False),  # its paper: insensitive to d in (2, 100)
}
UNCERTAIN = ["hib1", "hib2", "hib1-beta0", "spe"]  # models with an eta
POINT = ["point", "contrastive", "pn", "fstat", "fstat-d30"]  # point embeddings: the PQ baseline applies
DISENTANGLE = POINT + ["hib1", "hib1-beta0", "spe"]  # point vectors or Gaussian means
EXTRA = DISENTANGLE + ["dimco"]  # models that get the extra evaluation
EPISODIC = ["point", "pn", "spe"]  # SPE's Table 2: episodic accuracy (point: PN's rule)
# The paper's own training settings (train --preset), for --presets.
PRESETS = {m: "hib-ndigit" for m in ("point", "contrastive", "hib1", "hib2", "hib1-beta0")}
PRESETS.update({m: "spe-ndigit" for m in ("spe", "pn")})
DIMCO_BITS = 16  # `train --method dimco` defaults: 4 dimensions of k = 16
# --iterations counts batches of hib-ndigit's 128 items (point, contrastive
# and the HIB models). The episodic models (an episode of spe-ndigit holds all
# 70 classes x 10 items for N = 2) get the same number of training items
# instead (`train --budget-items`): the same compute, where the same count of
# episodes would be 5.5 times the images. (dimco and fstat, outside the
# papers' N-digit tables, count their own batches.)
ITERATION_ITEMS = 128
EPISODIC_TRAINING = ["spe", "pn"]


def pq_spec(dim):
    """M x B for FAISS PQ at DIMCO's bits: M divides D, B = bits / M <= 8
    (k-means with 256 centroids per sub-code at most); else D sub-codes of
    floor(bits / D) bits, fewer bits than DIMCO's."""
    for m in range(1, dim + 1):
        if dim % m == 0 and DIMCO_BITS % m == 0 and DIMCO_BITS // m <= 8:
            return "%dx%d" % (m, DIMCO_BITS // m)
    return "%dx%d" % (dim, max(1, DIMCO_BITS // dim))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build directory with bin/hedgedb (default: build)")
    p.add_argument("--out", required=True, help="output directory (resumable)")
    p.add_argument("--budget", type=float, default=60,
                   help="seconds of training per model and seed (default 60; see --iterations)")
    p.add_argument("--iterations", type=int, default=0,
                   help="train this many iterations per model and seed instead of --budget seconds, "
                        "checkpointed and resumed from the checkpoint after a stop (default 0: --budget)")
    p.add_argument("--presets", action="store_true",
                   help="train with each paper's preset (%s); --setup applies to the other models" %
                        ", ".join("%s: %s" % (preset, " ".join(m for m in MODELS if PRESETS.get(m) == preset))
                                  for preset in sorted(set(PRESETS.values()))))
    p.add_argument("--jobs", type=int, default=1, help="models trained and evaluated at a time (default 1)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="train --precision of every model (default fp32; bf16: the backbone's steps in "
                        "bfloat16, bench/RESULTS.md 'bfloat16 training')")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds (default 1 2 3)")
    p.add_argument("--items", type=int, nargs="+", default=[2], help="digits per composite N (default 2; HIB: 2 3)")
    p.add_argument("--dims", type=int, nargs="+", default=[2], help="embedding dimensions D (default 2; HIB: 2 3)")
    p.add_argument("--data", default="fashion-mnist",
                   help="base set of the composites: fashion-mnist (default), mnist or idx:DIR")
    p.add_argument("--composite-layout", default="reference",
                   help="evaluate/train --composite-layout: reference (default), hib or hib-scaled")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ", ".join(MODELS))
    p.add_argument("--setup", default="--arch mlp --mlp-hidden 256",
                   help="backbone flags (default: the MLP over pixels, bench/RESULTS.md 'Training setup')")
    p.add_argument("--protocol", default="hib-table2", help="evaluate --protocol (default hib-table2)")
    p.add_argument("--mc-repeats", type=int, default=3,
                   help="Monte Carlo repeats per evaluation; 0: the protocol's (hib-table2: 10)")
    p.add_argument("--max-items", type=int, default=0,
                   help="test items evaluated; 0: the protocol's (the whole split)")
    p.add_argument("--extra-items", type=int, default=2000,
                   help="test items of the extra evaluation (disentanglement, PQ, episodes; 0: the protocol's): "
                        "a 500-d F-statistic model takes minutes per pass over the whole split")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    p.add_argument("--summarize-only", action="store_true", help="only write tables, claims and pictures")
    return p.parse_args()


class Failed(Exception):
    pass


_say_lock = threading.Lock()


def say(text):
    """One progress line, whole, whichever --jobs worker prints it."""
    with _say_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


# The settings a run's models were trained and evaluated with, kept in
# OUT/run.json: a later part must use the same ones (its tables say so).
RUN_SETTINGS = ["data", "composite_layout", "budget", "iterations", "presets", "precision", "setup",
                "protocol", "mc_repeats", "max_items", "extra_items", "episodic_budget"]


def check_run_settings(args):
    """Writes OUT/run.json at a run's first part; exits when a later part's
    settings differ from it (its models would not be the tables' models)."""
    path = os.path.join(args.out, "run.json")
    mine = {k: getattr(args, k, None) for k in RUN_SETTINGS}
    if args.iterations > 0:
        mine["budget"] = None  # not used
        mine["episodic_budget"] = "items"  # spe and pn: --iterations x ITERATION_ITEMS images
    if os.path.exists(path):
        kept = json.load(open(path))
        if "episodic_budget" not in kept and args.iterations > 0:
            # A run begun before spe and pn counted training images: theirs
            # would be of the other kind, unless none has begun.
            begun = [f for m in EPISODIC_TRAINING for f in glob.glob(os.path.join(args.out, "*-%s-s*" % m))]
            if begun:
                sys.exit("%s trained spe/pn for %d episodes before episodic models got the same training "
                         "images (--budget-items); choose a new --out (found %s)" % (
                             args.out, args.iterations, os.path.basename(begun[0])))
            kept["episodic_budget"] = mine["episodic_budget"]
            with open(path + ".tmp", "w") as f:
                json.dump(kept, f, indent=1)
            os.replace(path + ".tmp", path)
        differ = ["--%s %r (this run) vs %r (%s)" % (k.replace("_", "-"), mine[k], kept.get(k), path)
                  for k in RUN_SETTINGS if kept.get(k) != mine[k]]
        if differ:
            sys.exit("%s was trained with other settings: %s; continue it with the same flags, or "
                     "choose a new --out" % (args.out, "; ".join(differ)))
        return
    with open(path + ".tmp", "w") as f:
        json.dump(mine, f, indent=1)
    os.replace(path + ".tmp", path)


def load_run_settings(args):
    """--summarize-only: the settings OUT/run.json recorded, for the headers."""
    path = os.path.join(args.out, "run.json")
    if os.path.exists(path):
        for k, v in json.load(open(path)).items():
            if k in RUN_SETTINGS and v is not None:
                setattr(args, k, v)


def run(cmd, stdout_path, log_path, append=False):
    """Runs cmd; its stdout (JSON) goes to stdout_path only when it succeeds
    (else Failed). append: add to the log (a resumed training's earlier parts).
    A training that was interrupted (Ctrl-C reaches every job) exits 0 with
    "interrupted": its checkpoint, not a report, is what it leaves."""
    started = time.time()
    with open(log_path, "a" if append else "w") as log:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    if proc.returncode != 0:
        raise Failed("failed (exit %d, see %s): %s" % (proc.returncode, log_path, " ".join(cmd)))
    try:
        interrupted = json.loads(proc.stdout).get("interrupted", False)
    except (ValueError, AttributeError):
        interrupted = False
    if interrupted:
        raise Failed("stopped (interrupted; the next run resumes it, see %s): %s" % (log_path, " ".join(cmd)))
    with open(stdout_path + ".tmp", "w") as f:
        f.write(proc.stdout)
    os.replace(stdout_path + ".tmp", stdout_path)
    return time.time() - started


def snapshot_binary(build, out):
    """OUT/bin/hedgedb and OUT/lib/*.so*, copied at a run's first part and
    kept for the later ones: a rebuild of the tree leaves the run alone (a
    run spanning sessions trains every model with one binary; remove OUT/bin
    and OUT/lib to take a new build)."""
    bindir, libdir = os.path.join(out, "bin"), os.path.join(out, "lib")
    if not os.path.exists(os.path.join(bindir, "hedgedb")):
        os.makedirs(bindir, exist_ok=True)
        os.makedirs(libdir, exist_ok=True)
        # The newest file of each name: a build tree also holds older copies
        # (a pip build's setuptools/ directory) that must not win.
        newest = {}
        for lib in glob.glob(os.path.join(build, "**", "libhedgedb*.so*"), recursive=True):
            name = os.path.basename(lib)
            if "CMakeFiles" not in lib and (name not in newest or
                                            os.path.getmtime(lib) > os.path.getmtime(newest[name])):
                newest[name] = lib
        for lib in newest.values():
            shutil.copy2(lib, libdir, follow_symlinks=True)
        # The binary last, atomically: its presence marks a complete copy.
        shutil.copy2(os.path.join(build, "bin", "hedgedb"), os.path.join(bindir, "hedgedb.tmp"))
        os.replace(os.path.join(bindir, "hedgedb.tmp"), os.path.join(bindir, "hedgedb"))
    elif not filecmp.cmp(os.path.join(build, "bin", "hedgedb"), os.path.join(bindir, "hedgedb"),
                         shallow=False):
        say("note: %s keeps the binary of its first part (%s differs; remove %s and %s to use it)" % (
            out, os.path.join(build, "bin", "hedgedb"), bindir, libdir))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    os.environ.update(env)
    return os.path.join(bindir, "hedgedb")


def cells(args):
    """(items, dim, model) of the run; models without --dim run once per N."""
    chosen = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in chosen:
        if m not in MODELS:
            sys.exit("unknown model '%s' (known: %s)" % (m, ", ".join(MODELS)))
    for n in args.items:
        for d in args.dims:
            for m in chosen:
                if MODELS[m][1] or d == args.dims[0]:
                    yield n, d if MODELS[m][1] else None, m


def cell_name(n, d, model):
    return "n%d-%s-%s" % (n, "d%d" % d if d else "own", model)


def data_text(args):
    return "`--data %s --composite-layout %s`" % (args.data, args.composite_layout)


def data_flags(args, n):
    return ["--data", args.data, "--items", str(n), "--composite-layout", args.composite_layout]


def budget_text(args):
    """The training budget and setting, for the tables' headers."""
    if args.iterations > 0:
        budget = "%d iterations of training per model and seed" % args.iterations
        episodic = [m for m in EPISODIC_TRAINING if m in [c.strip() for c in args.models.split(",")]]
        if episodic:
            budget += " (%s: as many training images, %d, in episodes)" % (
                ", ".join(episodic), args.iterations * ITERATION_ITEMS)
    else:
        budget = "%.0f s of training per model and seed" % args.budget
    setting = []
    chosen = [m.strip() for m in args.models.split(",") if m.strip()]
    if args.presets and any(m in PRESETS for m in chosen):
        setting.append("each paper's `--preset` (%s)" % ", ".join(
            "%s: %s" % (m, PRESETS[m]) for m in chosen if m in PRESETS))
    if args.setup.strip():
        setting.append(("otherwise " if args.presets else "") + "`%s`" % args.setup.strip())
    if args.precision != "fp32":
        setting.append("`--precision %s`" % args.precision)
    return budget + (" (%s)" % "; ".join(setting) if setting else "")


def train_flags(args, model):
    """The model's flags beyond the method and --dim: its paper's preset
    (--presets) or --setup."""
    if args.presets and model in PRESETS:
        return ["--preset", PRESETS[model]]
    return args.setup.split()


def train_and_evaluate(args, binary):
    # Seed by seed: every model has its first seed before any has a second,
    # so a run stopped part-way (a long one spans several sessions) leaves
    # every column of the tables filled.
    todo = [(n, d, m, s) for s in args.seeds for n, d, m in cells(args)]
    if args.iterations > 0:
        episodic = sum(1 for job in todo if job[2] in EPISODIC_TRAINING)
        print("%d models of %d iterations each%s, %d at a time" % (
            len(todo), args.iterations,
            " (%d of them episodic: %d training images, as many)" % (episodic, args.iterations * ITERATION_ITEMS)
            if episodic else "", args.jobs), flush=True)
    else:
        print("%d models, %.0f s of training each, %d at a time: about %.0f min of training plus "
              "evaluation" % (len(todo), args.budget, args.jobs,
                              len(todo) * args.budget / 60 / args.jobs), flush=True)
    if args.jobs <= 1:
        for job in todo:
            train_and_evaluate_one(args, binary, *job)
    else:
        import concurrent.futures
        stop = threading.Event()  # after Ctrl-C or a failure: start no more jobs

        def job(n, d, model, seed):
            if stop.is_set():
                return None
            try:
                train_and_evaluate_one(args, binary, n, d, model, seed)
                return None
            except Exception as e:  # reported at once, with the model, not hours later
                stop.set()
                text = "%s seed %d: %s%s" % (cell_name(n, d, model), seed,
                                             "" if isinstance(e, Failed) else type(e).__name__ + ": ", e)
                say(text)
                return text

        pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
        try:
            futures = [pool.submit(job, *j) for j in todo]
            failures = [f.result() for f in futures if f.result() is not None]
        except KeyboardInterrupt:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        if failures:
            raise Failed("\n".join(failures))
    # Embeddings for the ellipse picture: the first seed's 2-D MoG-1 model.
    for n in args.items:
        if 2 not in args.dims or "hib1" not in [m.strip() for m in args.models.split(",")]:
            continue
        base = os.path.join(args.out, "%s-s%d" % (cell_name(n, 2, "hib1"), args.seeds[0]))
        for corrupt in (False, True):
            prefix = base + (".corrupt" if corrupt else ".clean")
            if os.path.exists(prefix + ".embed.json"):
                continue
            cmd = [binary, "embed"] + data_flags(args, n) + ["--model", base + ".model",
                   "--split", "test-seen", "--max-items", "400", "--out", prefix,
                   "--threads", str(args.threads)] + (["--corrupt"] if corrupt else [])
            run(cmd, prefix + ".embed.json", prefix + ".embed.log")


def train_and_evaluate_one(args, binary, n, d, model, seed):
    """Trains (or resumes) one model of one seed and runs its evaluations,
    each skipped when its JSON exists."""
    base = os.path.join(args.out, "%s-s%d" % (cell_name(n, d, model), seed))
    data = data_flags(args, n)
    if not os.path.exists(base + ".train.json"):
        flags = MODELS[model][0].split() + (["--dim", str(d)] if d else [])
        cmd = [binary, "train"] + data + flags + train_flags(args, model) + ["--precision", args.precision]
        resumed = False
        if args.iterations > 0:
            # A stop (the end of a working session, a reboot) loses at most
            # ten minutes: the next run of this command resumes.
            if model in EPISODIC_TRAINING:
                cmd += ["--budget-items", str(args.iterations * ITERATION_ITEMS)]
            else:
                cmd += ["--iterations", str(args.iterations)]
            cmd += ["--checkpoint-seconds", "600"]
            ckpt = base + ".model.ckpt"
            if os.path.exists(ckpt) and not os.path.exists(ckpt + ".state"):
                # Killed while writing its first checkpoint (the trainer
                # writes the weights, then the optimizer state): start over.
                say("note: %s has no %s.state (a checkpoint cut short): training %s seed %d afresh" % (
                    ckpt, ckpt, cell_name(n, d, model), seed))
                for stale in glob.glob(ckpt + "*"):
                    os.remove(stale)
            resumed = os.path.exists(ckpt)
            if resumed:
                cmd += ["--resume", ckpt]
        else:
            cmd += ["--max-seconds", str(args.budget), "--iterations", "100000000"]
        if model not in EPISODIC_TRAINING or args.iterations <= 0:
            cmd += ["--eval-every", "1000"]  # episodic: train's default, 20 validations a run
        cmd += ["--threads", str(args.threads), "--seed", str(seed),
                "--progress-seconds", "1000" if args.iterations <= 0 else "60", "--out", base + ".model"]
        say("%s %s seed %d" % ("resuming" if resumed else "training", cell_name(n, d, model), seed))
        secs = run(cmd, base + ".train.json", base + ".train.log", append=resumed)
        say("trained %s seed %d (%.0f s)" % (cell_name(n, d, model), seed, secs))
    if not os.path.exists(base + ".eval.json"):
        cmd = [binary, "evaluate"] + data + ["--model", base + ".model", "--protocol", args.protocol,
                                             "--pairs", "10000", "--seed", str(seed),
                                             "--threads", str(args.threads)]
        if args.mc_repeats > 0:
            cmd += ["--mc-repeats", str(args.mc_repeats)]
        if args.max_items > 0:
            cmd += ["--max-items", str(args.max_items)]
        secs = run(cmd, base + ".eval.json", base + ".eval.log")
        say("evaluated %s seed %d (%.0f s)" % (cell_name(n, d, model), seed, secs))
    if model in EXTRA and not os.path.exists(base + ".extra.json"):
        spec = json.load(open(base + ".train.json"))["create_flags"]["dim"]
        cmd = [binary, "evaluate"] + data + ["--model", base + ".model", "--protocol", args.protocol,
                                             "--mc-repeats", "1", "--pairs", "10000", "--seed", str(seed),
                                             "--threads", str(args.threads)]
        if model in DISENTANGLE:
            cmd += ["--disentanglement"]
        if model in POINT:
            cmd += ["--pq", pq_spec(int(spec))]
        if model in EPISODIC:
            cmd += ["--episodes", "1000"]  # SPE's Table 2
        if args.extra_items > 0:
            cmd += ["--max-items", str(args.extra_items)]
        secs = run(cmd, base + ".extra.json", base + ".extra.log")
        parts = [name for name, models in (("disentanglement", DISENTANGLE), ("PQ", POINT),
                                           ("episodes", EPISODIC)) if model in models]
        say("evaluated %s seed %d: extra (%s) (%.0f s)" % (
            cell_name(n, d, model), seed, ", ".join(parts) or "retrieval", secs))


# ----------------------------------------------------------------- summary

def value(x):
    """A number of a report: plain, or the mean of a Monte Carlo repeat object."""
    if isinstance(x, dict) and "mean" in x:
        return x["mean"]
    return x


def get(report, path):
    x = report
    for key in path.split("."):
        if not isinstance(x, dict) or key not in x:
            return None
        x = x[key]
    return value(x)


def load(out):
    """{(cell, seed): (train, eval)} of every finished model in OUT."""
    runs = {}
    for path in glob.glob(os.path.join(out, "*.eval.json")):
        base = path[:-len(".eval.json")]
        cell, seed = base.rsplit("-s", 1)
        try:
            report = json.load(open(path))
            if os.path.exists(base + ".extra.json"):
                report["extra"] = json.load(open(base + ".extra.json"))
            runs[(os.path.basename(cell), int(seed))] = (json.load(open(base + ".train.json")), report)
        except (OSError, ValueError):
            continue
    return runs


def mean_sd(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return None, None, 0
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float("nan")
    return m, sd, len(xs)


def fmt(stat, digits=3):
    m, sd, n = stat
    if m is None:
        return "-"
    if n < 2:
        return "%.*f" % (digits, m)
    return "%.*f ± %.*f" % (digits, m, digits, sd)


METRICS = [  # column, report path
    ("iterations", "train:iterations"),
    ("AP clean", "verification.clean.average_precision"),
    ("AP corrupt", "verification.corrupt.average_precision"),
    ("KNN clean", "retrieval.clean.knn_accuracy"),
    ("KNN corrupt gallery", "retrieval.corrupt.knn_accuracy"),
    ("KNN corrupt probe", "retrieval.corrupt_probe.knn_accuracy"),
    ("R@1 clean", "retrieval.clean.recall_at_1"),
    ("MAP@R clean", "retrieval.clean.map_at_r"),
    ("tau AP clean", "verification.clean.eta_calibration.kendall_tau"),
    ("tau AP corrupt", "verification.corrupt.eta_calibration.kendall_tau"),
    ("tau KNN clean", "retrieval.clean.eta_calibration.kendall_tau"),
    ("tau KNN corrupt probe", "retrieval.corrupt_probe.eta_calibration.kendall_tau"),
    ("ERC R@1 clean", "retrieval.clean.eta_calibration.erc_area"),
    ("ERC R@1 corrupt probe", "retrieval.corrupt_probe.eta_calibration.erc_area"),
    ("eta clean", "mean_eta.clean"),
    ("eta corrupt", "mean_eta.corrupt"),
]


def metric(train, report, path):
    if path.startswith("train:"):
        return train.get(path[len("train:"):])
    return get(report, path)


def per_seed(runs, cell, path):
    return [metric(t, e, path) for (c, _), (t, e) in sorted(runs.items()) if c == cell]


def tables(runs, args):
    lines = ["# Paper reproduction: every metric", "",
             "Data: %s. Budget %s, seeds %s; `evaluate --protocol %s%s`. "
             "Mean ± sd over seeds." % (data_text(args), budget_text(args), " ".join(map(str, args.seeds)), args.protocol,
                                         " --mc-repeats %d" % args.mc_repeats if args.mc_repeats else ""), ""]
    cellnames = sorted({c for c, _ in runs})
    lines.append("| model | seeds | " + " | ".join(name for name, _ in METRICS) + " |")
    lines.append("|---" * (len(METRICS) + 2) + "|")
    for cell in cellnames:
        seeds = len([1 for c, _ in runs if c == cell])
        row = [fmt(mean_sd(per_seed(runs, cell, path)), 0 if name == "iterations" else 3)
               for name, path in METRICS]
        lines.append("| %s | %d | %s |" % (cell, seeds, " | ".join(row)))
    lines += [""] + uncertainty_table(runs, cellnames)
    lines += [""] + learning_table(runs, args)
    lines += ["", "Disentanglement (F-statistic paper, section 4; factors: the items at each position) and "
              "product quantization at DIMCO's %d bits (point models; clean probes, ADC), and SPE's "
              "episodic accuracy (1,000 episodes, 5 shots, 5 queries; point models by PN's rule), from one "
              "more evaluation with one Monte Carlo repeat on %s test items (so its unquantized R@1 differs "
              "from the table above):" % (DIMCO_BITS, " or ".join(str(i) for i in sorted(
                  {e["extra"]["items"] for (_, _), (_, e) in runs.items() if "extra" in e})) or "no"), "",
              "| model | modularity | explicitness | PQ | PQ R@1 clean | PQ MAP@R clean | unquantized R@1 clean "
              "| episodic clean | episodic corrupt support | episodic corrupt query |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for cell in cellnames:
        if not any(c == cell and "extra" in e for (c, _), (_, e) in runs.items()):
            continue
        specs = sorted({e["extra"].get("pq", {}).get("spec", "-") for (c, _), (_, e) in runs.items()
                        if c == cell and "extra" in e})
        episodic = [fmt(mean_sd(per_seed(runs, cell, "extra.episodes.accuracy.%s.mean" % c)))
                    for c in ("clean", "corrupt_support", "corrupt_query")]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            cell, fmt(mean_sd(per_seed(runs, cell, "extra.disentanglement.modularity"))),
            fmt(mean_sd(per_seed(runs, cell, "extra.disentanglement.explicitness"))), ", ".join(specs),
            fmt(mean_sd(per_seed(runs, cell, "extra.pq.retrieval.clean.recall_at_1"))),
            fmt(mean_sd(per_seed(runs, cell, "extra.pq.retrieval.clean.map_at_r"))),
            fmt(mean_sd(per_seed(runs, cell, "extra.retrieval.clean.recall_at_1"))), " | ".join(episodic)))
    extra = []
    for cell in cellnames:
        if cell.endswith("-dimco"):
            extra.append("- %s: DIMCO eq. 6-7 on 5 x 16 balanced batches %s bits (H(Y) of a batch %.2f bits)" % (
                cell, fmt(mean_sd(per_seed(runs, cell, "dimco.factorised_information_batches.mean_bits")), 2),
                math.log2(5)))
    return "\n".join(lines + [""] + extra) + "\n"


VALIDATION = re.compile(r"^\[train [^]]*\] iter (\d+) validation MAP@R ([0-9.]+)")
RESUMING = re.compile(r"^\[train [^]]*\] .*, resuming at (\d+), ")
BATCH_ITEMS = re.compile(r"^\[train [^]]*\] .*, (\d+) items/batch, ")


def training_log(out, cell, seed):
    """What a training's log says of its course: [(iteration, validation
    MAP@R)] in order, and the training items per iteration (an episode's
    support and query; None where the log does not say). A resumed training
    repeats the iterations after its checkpoint; the last value of an
    iteration wins (a run is deterministic for its seed, so they agree)."""
    curve, per_batch = {}, None
    try:
        with open(os.path.join(out, "%s-s%d.train.log" % (cell, seed))) as f:
            for line in f:
                m = VALIDATION.match(line)
                if m:
                    curve[int(m.group(1))] = float(m.group(2))
                    continue
                m = BATCH_ITEMS.match(line)
                if m and per_batch is None:
                    per_batch = int(m.group(1))
                m = RESUMING.match(line)
                if m:  # what the stopped part logged after its checkpoint is redone (or not reached)
                    curve = {i: v for i, v in curve.items() if i <= int(m.group(1))}
    except OSError:
        pass
    return sorted(curve.items()), per_batch


def last_third_gain(curve):
    """Mean validation MAP@R over the last third of the iterations minus the
    mean over the middle third: near 0 when the curve has flattened."""
    if not curve:
        return None
    end = curve[-1][0]
    middle = [v for i, v in curve if end / 3 < i <= 2 * end / 3]
    last = [v for i, v in curve if i > 2 * end / 3]
    if not middle or not last:
        return None
    return sum(last) / len(last) - sum(middle) / len(middle)


def learning_table(runs, args):
    """Per model: where its validation MAP@R stood at a third, two thirds and
    the end of its training, its best, and the gain over the last third."""
    lines = ["Learning curves (validation MAP@R, `train --eval-every`; mean ± sd over seeds; the gain is the "
             "mean over the last third of the iterations minus the mean over the middle third):", "",
             "| model | seeds | iterations (spe, pn: episodes) | MAP@R at 1/3 | at 2/3 | at the end | best "
             "| gain, last third |",
             "|---|---|---|---|---|---|---|---|"]
    for cell in sorted({c for c, _ in runs}):
        curves = [training_log(args.out, cell, seed)[0] for c, seed in sorted(runs) if c == cell]
        curves = [c for c in curves if c]
        if not curves:
            continue

        def at(curve, share):  # the last validation at or before share of the iterations
            before = [v for i, v in curve if i <= share * curve[-1][0]]
            return before[-1] if before else None

        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            cell, len(curves), fmt(mean_sd([c[-1][0] for c in curves]), 0),
            fmt(mean_sd([at(c, 1 / 3) for c in curves])), fmt(mean_sd([at(c, 2 / 3) for c in curves])),
            fmt(mean_sd([c[-1][1] for c in curves])), fmt(mean_sd([max(v for _, v in c) for c in curves])),
            fmt(mean_sd([last_third_gain(c) for c in curves]))))
    return lines if len(lines) > 4 else []


ERC_SPLITS = [("clean", "clean probes, clean gallery"), ("corrupt_probe", "corrupt probes, clean gallery")]


def uncertainty_table(runs, cellnames):
    """Per probabilistic model: Kendall's tau of eta against KNN accuracy (HIB
    Table 2) next to the error-versus-reject area of recall@1 by eta
    ("Probabilistic Embeddings Revisited"), with the two ends that area lies
    between: the oracle (errors rejected first) and chance (eta says nothing:
    1 - recall@1). Both come from the same `evaluate` report
    (retrieval.<split>.eta_calibration)."""
    probabilistic = [c for c in cellnames if c.split("-", 2)[2] in UNCERTAIN]
    if not probabilistic:
        return []
    lines = ["Uncertainty of every probabilistic model: Kendall's tau of eta (KNN accuracy per eta bin, higher "
             "is better) and the error-versus-reject area of recall@1 with the queries ranked by eta (ERC: the "
             "error of the least uncertain m queries averaged over m; lower is better; between the oracle's "
             "and chance, 1 - R@1). `evaluate` reports both under retrieval.<split>.eta_calibration. Tau "
             "is over 20 bins of equal counts; the equal-width bins (eta_calibration.equal_width) cut "
             "eta's range into 20 equal parts instead, the less likely reading of HIB section 4.4 (which sorts "
             "the items first).", "",
             "| model | " + " | ".join("tau %s | tau, equal-width bins | ERC %s | oracle | chance" % (split, split)
                                      for split, _ in ERC_SPLITS) + " |",
             "|---" * (1 + 5 * len(ERC_SPLITS)) + "|"]
    for cell in probabilistic:
        row = []
        for split, _ in ERC_SPLITS:
            base = "retrieval.%s.eta_calibration." % split
            row += [fmt(mean_sd(per_seed(runs, cell, base + key)))
                    for key in ("kendall_tau", "equal_width.kendall_tau", "erc_area", "erc_area_oracle",
                                "erc_area_chance")]
        lines.append("| %s | %s |" % (cell, " | ".join(row)))
    return lines


# The papers' tables, as printed: {(N, D): {model: values in the order of the
# table's metrics}}. Accuracies as fractions (SPE prints percentages).
#
# HIB Table 1: verification AP and KNN accuracy (K = 5, a majority of the
# neighbours right), clean probes against a clean or a corrupt gallery.
HIB_TABLE1 = {
    (2, 2): {"point": (0.987, 0.880, 0.871, 0.583), "hib1": (0.989, 0.907, 0.879, 0.760),
             "hib2": (0.990, 0.912, 0.888, 0.757)},
    (2, 3): {"point": (0.996, 0.913, 0.942, 0.874), "hib1": (0.996, 0.926, 0.953, 0.909),
             "hib2": (0.996, 0.932, 0.939, 0.885)},
    (3, 2): {"point": (0.978, 0.886, 0.554, 0.274), "hib1": (0.981, 0.899, 0.591, 0.350),
             "hib2": (0.976, 0.904, 0.540, 0.351)},
    (3, 3): {"point": (0.987, 0.901, 0.795, 0.522), "hib1": (0.989, 0.922, 0.770, 0.555),
             "hib2": (0.991, 0.925, 0.766, 0.598)},
}
TAU = "eta_calibration.kendall_tau"
TABLE1_METRICS = [("AP clean", "verification.clean.average_precision"),
                  ("AP corrupt", "verification.corrupt.average_precision"),
                  ("KNN clean", "retrieval.clean.knn_accuracy"),
                  ("KNN corrupt", "retrieval.corrupt.knn_accuracy")]
# HIB Table 2: Kendall's tau of eta (20 bins) against AP and KNN accuracy, on
# the same four tests as Table 1 (KNN corrupt: clean probes, corrupt gallery,
# the probe's eta). N = 2, D = 3 is not in the table; N = 2, D = 2 is read
# from the paper's review draft (the published table's copy here is cut
# off; its N = 3 cells agree with the draft's).
HIB_TABLE2 = {
    (2, 2): {"hib1": (0.74, 0.81, 0.71, 0.47), "hib2": (0.43, 0.79, 0.57, 0.43)},
    (3, 2): {"hib1": (0.63, 0.82, 0.76, 0.49), "hib2": (0.28, 0.76, 0.29, 0.50)},
    (3, 3): {"hib1": (0.51, 0.85, 0.74, 0.67), "hib2": (0.39, 0.79, 0.54, 0.34)},
}
TABLE2_METRICS = [("tau AP clean", "verification.clean." + TAU), ("tau AP corrupt", "verification.corrupt." + TAU),
                  ("tau KNN clean", "retrieval.clean." + TAU), ("tau KNN corrupt", "retrieval.corrupt." + TAU)]
# HIB's KNN bins "range from the lowest to highest" eta (section 4.4), which
# may mean bins of equal eta width rather than its verification's
# "equal-sized" ones: Table 2's KNN taus against ours with such bins.
WIDTH_TAU = "eta_calibration.equal_width.kendall_tau"
HIB_TABLE2_KNN = {cell: {model: values[2:] for model, values in models.items()}
                  for cell, models in HIB_TABLE2.items()}
TABLE2_KNN_WIDTH_METRICS = [("tau KNN clean, equal-width bins", "retrieval.clean." + WIDTH_TAU),
                            ("tau KNN corrupt, equal-width bins", "retrieval.corrupt." + WIDTH_TAU)]
# HIB Table 5 (appendix E): MoG-1 without and with the KL term.
HIB_TABLE5 = {
    (2, 2): {"hib1-beta0": (0.986, 0.900, 0.867, 0.729, 0.680, 0.864, 0.748, 0.636),
             "hib1": (0.988, 0.906, 0.891, 0.781, 0.766, 0.836, 0.800, 0.609)},
    (3, 3): {"hib1-beta0": (0.993, 0.932, 0.858, 0.685, 0.425, 0.677, -0.080, 0.183),
             "hib1": (0.992, 0.932, 0.861, 0.730, 0.630, 0.764, 0.685, 0.549)},
}
# SPE Table 2, seen test classes: episodic accuracy (1,000 episodes) of PN
# and SPE with clean support and query, corrupt support, corrupt query.
SPE_TABLE2 = {
    (2, 2): {"pn": (0.911, 0.727, 0.531), "spe": (0.930, 0.924, 0.537)},
    (2, 3): {"pn": (0.950, 0.933, 0.611), "spe": (0.942, 0.938, 0.582)},
    (3, 2): {"pn": (0.658, 0.446, 0.338), "spe": (0.802, 0.767, 0.402)},
    (3, 3): {"pn": (0.906, 0.827, 0.564), "spe": (0.890, 0.878, 0.481)},
}
SPE2_METRICS = [("episodic " + c.replace("_", " "), "extra.episodes.accuracy.%s.mean" % c)
                for c in ("clean", "corrupt_support", "corrupt_query")]
# (file section, paper table, its models and their labels, its metrics, a note)
PAPER_TABLES = [
    ("HIB Table 1", HIB_TABLE1, [("point", "point"), ("hib1", "MoG-1"), ("hib2", "MoG-2")], TABLE1_METRICS,
     "KNN corrupt: clean probes against the corrupt gallery, as HIB's."),
    ("HIB Table 2", HIB_TABLE2, [("hib1", "MoG-1"), ("hib2", "MoG-2")], TABLE2_METRICS,
     "Kendall's tau of eta, 20 bins, sign as HIB's (positive: accuracy falls as eta grows); KNN corrupt: "
     "clean probes (their eta) against the corrupt gallery. N = 2, D = 2 from HIB's review draft."),
    ("HIB Table 2, KNN with equal-width eta bins", HIB_TABLE2_KNN, [("hib1", "MoG-1"), ("hib2", "MoG-2")],
     TABLE2_KNN_WIDTH_METRICS,
     "Table 2's KNN taus against ours with 20 bins of equal eta width (HIB section 4.4 sorts the items by eta "
     "and bins them \"ranging from the lowest to highest range of uncertainty\", the less likely reading; for "
     "verification it says \"equal-sized\" bins). "
     "Eta is skewed, so most items fall in the first bin and the others are small or empty (left out)."),
    ("HIB Table 5", HIB_TABLE5, [("hib1-beta0", "MoG-1, beta 0"), ("hib1", "MoG-1, beta 1e-4")],
     TABLE1_METRICS + TABLE2_METRICS, "HIB appendix E: the KL term's weight."),
    ("SPE Table 2", SPE_TABLE2, [("pn", "PN"), ("spe", "SPE")], SPE2_METRICS,
     "Seen test classes; episodes of 5 shots and 5 queries per class (the paper's sizes are lost from our "
     "copy), 1,000 episodes; SPE prints percentages."),
]


def side_by_side(runs, args):
    """Each paper table beside ours: one row per cell, model and metric that
    this OUT holds; the difference is ours minus the paper's."""
    lines = ["# The papers' tables side by side", "",
             "Data: %s; %s; `evaluate --protocol %s%s`. Ours: mean ± sd over the seeds (n); difference: ours "
             "minus the paper's." % (data_text(args), budget_text(args), args.protocol,
                                     " --mc-repeats %d" % args.mc_repeats if args.mc_repeats else "")]
    for title, table, models, metrics, note in PAPER_TABLES:
        rows = []
        for (n, d), values in sorted(table.items()):
            for model, label in models:
                cell = cell_name(n, d, model)
                if model not in values or not any(c == cell for c, _ in runs):
                    continue
                for (metric_label, path), paper in zip(metrics, values[model]):
                    ours = mean_sd(per_seed(runs, cell, path))
                    diff = "-" if ours[0] is None else "%+.3f" % (ours[0] - paper)
                    rows.append("| N = %d, D = %d | %s | %s | %.3f | %s | %d | %s |" % (
                        n, d, label, metric_label, paper, fmt(ours), ours[2], diff))
        lines += ["", "## " + title, "", note, "",
                  "| cell | model | metric | %s | ours | n | difference |" % title, "|---|---|---|---:|---:|---:|---:|"]
        lines += rows or ["| - | none of its models in this run | | | | | |"]
    return "\n".join(lines) + "\n"


def verdict(diff, se, no_difference=False):
    """'holds' when the claimed difference is > 2 standard errors, the reverse
    'does not hold', else 'within noise'. A claim of no difference holds within
    noise (no evidence against it) and does not hold beyond 2 standard errors
    either way."""
    if diff is None or se is None or math.isnan(se):
        return "n/a (fewer than 2 seeds)"
    if no_difference:
        return "holds (within noise)" if abs(diff) <= 2 * se else "does not hold"
    if diff > 2 * se:
        return "holds"
    if diff < -2 * se:
        return "does not hold"
    return "within noise"


def compare(a, b):
    """Claim a > b over seeds: difference of means and its standard error (unpaired)."""
    ma, sa, na = mean_sd(a)
    mb, sb, nb = mean_sd(b)
    if ma is None or mb is None or na < 2 or nb < 2:
        return None, None
    return ma - mb, math.sqrt(sa ** 2 / na + sb ** 2 / nb)


def paired(a, b):
    """Claim a > b within each seed's model: the mean paired difference and its standard error."""
    d = [x - y for x, y in zip(a, b) if x is not None and y is not None]
    m, sd, n = mean_sd(d)
    if m is None or n < 2:
        return None, None
    return m, sd / math.sqrt(n)


LABELS = {"point": "point", "contrastive": "margin contrastive", "hib1": "MoG-1", "hib2": "MoG-2",
          "hib1-beta0": "MoG-1 beta 0", "spe": "SPE", "pn": "PN"}
# HIB Table 7 (appendix G, plurality KNN): tau of eta for corrupt probes
# against the clean gallery, MoG-1.
HIB_TABLE7_CORRUPT_PROBE = {(2, 2): 0.94, (2, 3): 0.89, (3, 2): 0.86, (3, 3): 0.90}


def claims(runs, args):
    """Every claim of the papers, per N x D cell of the run: where a paper
    prints a figure for the cell, the claim takes the side the paper found
    better there (so a cell where the paper's own numbers reverse a
    comparison is tested in the paper's direction); the claims without a
    table figure (ERC, eta, appendix B, DIMCO, F-statistic) run on the first
    cell."""
    rows = []
    first = (args.items[0], args.dims[0])
    found = {(int(c.split("-")[0][1:]), int(c.split("-")[1][1:])) for c, _ in runs if c.split("-")[1] != "own"}
    if found and first not in found:
        first = min(found)  # a summary of an OUT without the default cell
    for n, d in [first] + sorted(found - {first}):  # a summary holds every cell of OUT
        rows += cell_claims(runs, n, d, (n, d) == first)
    head = ["# Paper reproduction: claims", "",
            "Data: %s. %s, seeds %s; `evaluate --protocol %s%s`. "
            "Ours: mean ± sd over seeds, the side claimed better first (where the paper prints both, the "
            "side it found better in that cell). Difference: claimed minus other, ± its standard error "
            "(unpaired across models, paired over seeds within one model). Verdict: holds when the "
            "difference exceeds two standard errors, does not hold when it is below minus two, else within "
            "noise; where the paper prints equal figures the claim is no difference." % (
                data_text(args), budget_text(args)[0].upper() + budget_text(args)[1:],
                " ".join(map(str, args.seeds)), args.protocol,
                " --mc-repeats %d" % args.mc_repeats if args.mc_repeats else ""), "",
            "| cell | claim | paper | ours (metric) | difference | verdict |", "|---|---|---|---|---|---|"]
    return "\n".join(head + rows) + "\n"


def cell_claims(runs, n, d, first):
    cell = lambda m: cell_name(n, d if MODELS[m][1] else None, m)
    s = lambda m, path: per_seed(runs, cell(m), path)
    where = "N = %d, D = %d" % (n, d)
    rows = []

    def claim(text, paper, ours_a, ours_b, diff_se, path_label, no_difference=False, at=where):
        diff, se = diff_se
        if not [x for x in ours_a if x is not None] or (
                ours_b is not None and not [x for x in ours_b if x is not None]):
            rows.append("| %s | %s | %s | - (%s) | - | not in this run |" % (at, text, paper, path_label))
            return
        ours = fmt(mean_sd(ours_a)) + ("" if ours_b is None else " vs " + fmt(mean_sd(ours_b)))
        difference = "-" if diff is None else "%+.3f ± %.3f" % (diff, se)
        rows.append("| %s | %s | %s | %s (%s) | %s | %s |" % (
            at, text, paper, ours, path_label, difference, verdict(diff, se, no_difference)))

    def versus(source, table, a, b, metrics, what, first_metric=0):
        """a against b on each metric from first_metric on (the table's
        figures in metrics' order), in the direction of the paper's figures."""
        figures = table.get((n, d), {})
        if a not in figures or b not in figures:
            return
        for (label, path), pa, pb in zip(metrics[first_metric:], figures[a][first_metric:],
                                         figures[b][first_metric:]):
            hi, lo, phi, plo = (a, b, pa, pb) if pa >= pb else (b, a, pb, pa)
            text = ("%s: %s and %s tie on %s" % (source, LABELS[a], LABELS[b], what(label)) if pa == pb else
                    "%s: %s beats %s on %s" % (source, LABELS[hi], LABELS[lo], what(label)))
            claim(text, "%s %.3f vs %.3f" % (label, phi, plo), s(hi, path), s(lo, path),
                  compare(s(hi, path), s(lo, path)), label, no_difference=pa == pb)

    metric_words = {"AP clean": "clean verification", "AP corrupt": "corrupt verification",
                    "KNN clean": "clean identification", "KNN corrupt": "corrupt identification"}
    for hedged in ("hib1", "hib2"):
        versus("HIB T1", HIB_TABLE1, hedged, "point", TABLE1_METRICS, metric_words.get)
    versus("HIB T1", HIB_TABLE1, "hib2", "hib1", TABLE1_METRICS[:2], metric_words.get, first_metric=1)
    for model in ("hib1", "hib2"):
        for (label, path), paper in zip(TABLE2_METRICS, HIB_TABLE2.get((n, d), {}).get(model, ())):
            zero = [0.0] * len(s(model, path))
            claim("HIB T2: eta predicts failure, %s (%s > 0)" % (LABELS[model], label), "%.2f" % paper,
                  s(model, path), None, paired(s(model, path), zero), label)
    if (n, d) in HIB_TABLE7_CORRUPT_PROBE:
        path = "retrieval.corrupt_probe." + TAU
        zero = [0.0] * len(s("hib1", path))
        claim("HIB T7: eta predicts failure of corrupt probes, MoG-1 (tau KNN corrupt probe > 0)",
              "%.2f (plurality KNN)" % HIB_TABLE7_CORRUPT_PROBE[(n, d)], s("hib1", path), None,
              paired(s("hib1", path), zero), "tau KNN corrupt probe")
    versus("HIB T5", HIB_TABLE5, "hib1", "hib1-beta0", TABLE1_METRICS + TABLE2_METRICS, lambda label: label)
    for i, condition in enumerate(("clean", "corrupt support", "corrupt query")):
        versus("SPE T2", SPE_TABLE2, "spe", "pn", SPE2_METRICS[:i + 1], lambda _: condition, first_metric=i)
    for model in UNCERTAIN:
        # Below chance = eta ranks the recall@1 errors last (paired per seed:
        # chance and area are measured on the same queries).
        for split, label in ERC_SPLITS:
            base = "retrieval.%s.eta_calibration." % split
            if not s(model, base + "erc_area") and not first:
                continue
            claim("Probabilistic Embeddings Revisited: rejecting by eta removes recall@1 errors first, "
                  "%s, %s" % (model, label), "ERC area below chance (1 - R@1)",
                  s(model, base + "erc_area"), s(model, base + "erc_area_chance"),
                  paired(s(model, base + "erc_area_chance"), s(model, base + "erc_area")),
                  "ERC R@1 %s vs chance; difference: chance minus ERC" % split)
    for model, source, paper in (("hib1", "HIB Fig. 3", "qualitative"),
                                 ("spe", "SPE", "SPE's variances grow with corruption")):
        if s(model, "mean_eta.clean") or first:
            claim("%s: corrupt inputs get higher eta (%s)" % (source, LABELS[model]), paper,
                  s(model, "mean_eta.corrupt"), s(model, "mean_eta.clean"),
                  paired(s(model, "mean_eta.corrupt"), s(model, "mean_eta.clean")), "mean eta corrupt vs clean")
    if not first:
        return rows
    knn_x, ap = "retrieval.clean.knn_accuracy", "verification.clean.average_precision"
    claim("HIB App. B: soft contrastive beats the margin loss (AP)", "soft above hard for every M (Fig. 9)",
          s("point", ap), s("contrastive", ap), compare(s("point", ap), s("contrastive", ap)), "AP clean")
    claim("HIB App. B: soft contrastive beats the margin loss (KNN)", "soft above hard for every M (Fig. 9)",
          s("point", knn_x), s("contrastive", knn_x), compare(s("point", knn_x), s("contrastive", knn_x)),
          "KNN clean")
    r1, pq_r1 = "retrieval.clean.recall_at_1", "extra.pq.retrieval.clean.recall_at_1"
    mapr, pq_mapr = "retrieval.clean.map_at_r", "extra.pq.retrieval.clean.map_at_r"
    # Both sides from the extra evaluation, so on the same items.
    claim("DIMCO: its codes beat PQ at equal bits (R@1)", "DIMCO above PQ at every k, d (its Table 2)",
          s("dimco", "extra." + r1), s("point", pq_r1), compare(s("dimco", "extra." + r1), s("point", pq_r1)),
          "R@1 clean, point model PQ at %d bits" % DIMCO_BITS)
    claim("DIMCO: its codes beat PQ at equal bits (MAP@R)", "as above",
          s("dimco", "extra." + mapr), s("point", pq_mapr),
          compare(s("dimco", "extra." + mapr), s("point", pq_mapr)),
          "MAP@R clean, point model PQ at %d bits" % DIMCO_BITS)
    claim("F-statistic: recall@1 matches or beats the other losses", "state of the art on CUB/Cars R@1",
          s("fstat", r1), s("point", r1), compare(s("fstat", r1), s("point", r1)), "R@1 clean, vs soft contrastive")
    claim("F-statistic: recall@1 insensitive to d", "relatively insensitive for 2 < d < 100",
          s("fstat-d30", r1), s("fstat", r1), compare(s("fstat-d30", r1), s("fstat", r1)), "R@1 clean, d = 30 vs 3",
          no_difference=True)
    mod = "extra.disentanglement.modularity"
    claim("F-statistic: more modular than distance losses", "best modularity (its Fig. 3, vs triplet)",
          s("fstat", mod), s("contrastive", mod), compare(s("fstat", mod), s("contrastive", mod)),
          "modularity, vs margin contrastive")
    ex = "extra.disentanglement.explicitness"
    claim("F-statistic: at least as explicit as distance losses", "best or tied explicitness (its Fig. 3)",
          s("fstat", ex), s("contrastive", ex), compare(s("fstat", ex), s("contrastive", ex)),
          "explicitness, vs margin contrastive")
    return rows


def pictures(runs, args):
    try:
        import matplotlib
    except ImportError:  # the tables and claims stand without the pictures
        print("matplotlib is not installed (python3-matplotlib): no pictures", file=sys.stderr)
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Ellipse

    written = []
    n, d = args.items[0], args.dims[0]
    base = os.path.join(args.out, "%s-s%d" % (cell_name(n, 2, "hib1"), args.seeds[0]))
    if os.path.exists(base + ".clean.mean.npy") and os.path.exists(base + ".corrupt.mean.npy"):
        fig, axes = plt.subplots(1, 2, figsize=(12, 6), sharex=True, sharey=True)
        cmap = plt.get_cmap("tab10")
        for ax, which in zip(axes, ("clean", "corrupt")):
            mean = np.load("%s.%s.mean.npy" % (base, which))
            var = np.load("%s.%s.var.npy" % (base, which))
            labels = np.load("%s.%s.labels.npy" % (base, which))
            first = labels // (10 ** (n - 1))  # the composite's leftmost item
            for m, v, c in zip(mean, var, first):  # 3 sd, as HIB Figure 4 draws them
                ax.add_patch(Ellipse(m, 6 * math.sqrt(v[0]), 6 * math.sqrt(v[1]), facecolor=cmap(int(c) % 10),
                                     edgecolor=cmap(int(c) % 10), linewidth=0.5, alpha=0.3))
            ax.scatter(mean[:, 0], mean[:, 1], s=4, c=[cmap(int(c) % 10) for c in first])
            ax.set_title("%s test composites (%d), mean sd %.3g" % (
                which, len(mean), float(np.mean((var[:, 0] * var[:, 1]) ** 0.25))))
            ax.set_xlabel("z1")
            ax.set_aspect("equal")
        axes[0].set_ylabel("z2")
        fig.suptitle("HIB MoG-1, N = %d, D = 2, seed %d: means and 3-sd ellipses, colour = leftmost item's class"
                     % (n, args.seeds[0]))
        fig.tight_layout(rect=(0, 0, 1, 0.95))  # room for the title
        path = os.path.join(args.out, "ellipses.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    for path in (learning_picture(runs, args, plt), eta_bins_picture(runs, args, plt, n, d)):
        if path:
            written.append(path)

    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    drew = False
    for ax, (split, title) in zip(axes, (("clean", "clean probes"), ("corrupt_probe", "corrupt probes"))):
        for model in UNCERTAIN:
            c = cell_name(n, d, model)
            curves = []
            for (cc, _), (_, e) in sorted(runs.items()):
                bins = (e.get("retrieval", {}).get(split, {}).get("eta_calibration", {}) or {}).get("bin_performance")
                if cc != c or not bins:
                    continue
                perf = [value(x) for x in bins]  # equal-count bins, least uncertain first
                curves.append([sum(perf[:len(perf) - k]) / (len(perf) - k) for k in range(len(perf))])
            if not curves:
                continue
            arr = np.array(curves)
            x = np.arange(arr.shape[1]) / arr.shape[1]
            ax.plot(x, arr.mean(0), label="%s (%d seed%s)" % (model, len(curves), "" if len(curves) == 1 else "s"))
            if len(curves) > 1:
                ax.fill_between(x, arr.mean(0) - arr.std(0, ddof=1), arr.mean(0) + arr.std(0, ddof=1), alpha=0.2)
            drew = True
        ax.set_title("KNN accuracy, %s" % title)
        ax.set_xlabel("share of the most uncertain inputs dropped (by eta)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("KNN accuracy of the inputs kept")
    axes[0].legend()
    fig.suptitle("Uncertainty against accuracy (HIB Fig. 5 as a drop curve), N = %d, D = %d, mean ± sd over seeds"
                 % (n, d))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    if drew:
        path = os.path.join(args.out, "uncertainty.png")
        fig.savefig(path, dpi=100)
        written.append(path)
    plt.close(fig)
    return written


def eta_bins_picture(runs, args, plt, n, d):
    """HIB Figure 5 for Table 2's two KNN tests (clean probes against the
    clean and the corrupt gallery): KNN accuracy per eta bin, equal-count
    bins on top, equal-width bins below (marker area by the bin's share of
    the probes; empty bins left out), one line per model, mean over seeds
    (eta_bins.png). The two rows are why the two taus differ."""
    import numpy as np
    tests = (("clean", "clean gallery"), ("corrupt", "corrupt gallery"))
    rows = (("", "equal-count bins"), ("equal_width", "equal-width bins"))
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True, sharey=True)
    cmap = plt.get_cmap("tab10")
    drew = False
    for r, (key, row_title) in enumerate(rows):
        for col, (split, test_title) in enumerate(tests):
            ax = axes[r][col]
            for k, model in enumerate(UNCERTAIN):
                perf, size, taus = [], [], []
                for (cell, _), (_, e) in sorted(runs.items()):
                    c = get(e, "retrieval.%s.eta_calibration" % split)
                    if cell != cell_name(n, d, model) or not isinstance(c, dict):
                        continue
                    c = c.get(key, {}) if key else c
                    if not c.get("bin_performance") or not c.get("bin_sizes"):
                        continue
                    perf.append([np.nan if value(x) is None else value(x) for x in c["bin_performance"]])
                    size.append([value(x) for x in c["bin_sizes"]])
                    taus.append(value(c.get("kendall_tau")))
                if not perf:
                    continue
                with np.errstate(invalid="ignore"):  # a bin empty in every seed stays NaN
                    mean_perf = np.nanmean(np.array(perf, dtype=float), axis=0)
                share = np.mean(np.array(size, dtype=float), axis=0) / np.sum(size[0])
                x = np.arange(len(mean_perf))
                tau = [t for t in taus if t is not None]
                label = "%s (%d seed%s), tau %s" % (model, len(perf), "" if len(perf) == 1 else "s",
                                                    "%.2f" % np.mean(tau) if tau else "-")
                ax.plot(x, mean_perf, color=cmap(k % 10), linewidth=1, label=label)
                ax.scatter(x, mean_perf, s=4 + 400 * share, color=cmap(k % 10), alpha=0.6)
                drew = True
            ax.set_title("KNN accuracy, clean probes, %s: %s" % (test_title, row_title), fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            if r == 1:
                ax.set_xlabel("eta bin (least uncertain first)")
        axes[r][0].set_ylabel("KNN accuracy in the bin")
    fig.suptitle("Eta bins of HIB Table 2's KNN taus, N = %d, D = %d (marker area: share of the probes)" % (n, d))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path = None
    if drew:
        path = os.path.join(args.out, "eta_bins.png")
        fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def learning_picture(runs, args, plt):
    """Validation MAP@R against iterations: one panel per N x D cell, one
    colour per model, one line per seed (learning_curves.png)."""
    by_panel, sizes = {}, []
    for cell, seed in sorted(runs):
        curve, per_batch = training_log(args.out, cell, seed)
        if curve:
            panel, model = cell.split("-", 2)[:2], cell.split("-", 2)[2]
            by_panel.setdefault("-".join(panel), {}).setdefault(model, []).append((curve, per_batch))
            sizes.append(per_batch)
    if not by_panel:
        return None
    # One axis for batches of pairs and episodes: the training images seen
    # (iterations where a log does not give its batch size).
    by_items = all(sizes)
    panels = sorted(by_panel)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), sharey=True, squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, panel in zip(axes[0], panels):
        for k, model in enumerate(sorted(by_panel[panel])):
            for j, (curve, per_batch) in enumerate(by_panel[panel][model]):
                scale = per_batch / 1e6 if by_items else 1
                ax.plot([i * scale for i, _ in curve], [v for _, v in curve], color=cmap(k % 10), linewidth=1,
                        alpha=0.8, label="%s (%d seed%s)" % (model, len(by_panel[panel][model]),
                                                             "" if len(by_panel[panel][model]) == 1 else "s")
                        if j == 0 else None)
        n, d = panel.split("-")
        ax.set_title("N = %s, %s" % (n[1:], "D = " + d[1:] if d.startswith("d") else "own D"))
        ax.set_xlabel("training images seen (millions)" if by_items else "training iterations")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("validation MAP@R (one line per seed)")
    fig.suptitle("Learning curves: %s" % data_text(args).replace("`", ""))
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    path = os.path.join(args.out, "learning_curves.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.summarize_only:
        load_run_settings(args)
    else:
        check_run_settings(args)
        binary = snapshot_binary(args.build, args.out)
        try:
            train_and_evaluate(args, binary)
        except Failed as e:
            sys.exit(str(e))
    runs = load(args.out)
    if not runs:
        sys.exit("no finished evaluations in " + args.out)
    with open(os.path.join(args.out, "tables.md"), "w") as f:
        f.write(tables(runs, args))
    with open(os.path.join(args.out, "claims.md"), "w") as f:
        f.write(claims(runs, args))
    with open(os.path.join(args.out, "side_by_side.md"), "w") as f:
        f.write(side_by_side(runs, args))
    for path in pictures(runs, args):
        print("wrote", path)
    print("wrote", ", ".join(os.path.join(args.out, f)
                             for f in ("tables.md", "claims.md", "side_by_side.md")))


if __name__ == "__main__":
    main()
