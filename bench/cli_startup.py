#!/usr/bin/env python3
"""Start-up time of `hedgedb` commands: two builds of bin/hedgedb side by side.

Times N runs of --help, list, stats, search (1,000 Gaussian items, D = 16, 10
queries) and `train --help` for each binary and prints, per command, the median
wall time, the ratio, the median CPU time (user + system, less sensitive to
other load on the machine) and the number of shared libraries the run loaded (LD_DEBUG=libs
"calling init" lines, the executable's own dependencies and any dlopen'ed
module). The two binaries alternate run by run, so load on the machine hits
both alike. The database is made with the "after" binary.

Usage: bench/cli_startup.py --before OLD/bin/hedgedb --after build/bin/hedgedb [--runs 20]
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time


def run(binary, args, env=None):
    result = subprocess.run([binary] + args, capture_output=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{binary} {' '.join(args)} failed:\n{result.stderr.decode()}")
    return result


def seconds(binary, args):
    """Wall and CPU (user + system) seconds of one run."""
    def cpu():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime
    cpu_start, start = cpu(), time.perf_counter()
    run(binary, args)
    return time.perf_counter() - start, cpu() - cpu_start


def libraries(binary, args):
    env = dict(os.environ, LD_DEBUG="libs")
    return run(binary, args, env).stderr.decode().count("calling init:")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--runs", type=int, default=20)
    opts = parser.parse_args()
    binaries = {"before": opts.before, "after": opts.after}
    with tempfile.TemporaryDirectory() as work:
        g, db = os.path.join(work, "g"), os.path.join(work, "db")
        run(opts.after, ["generate", "--kind", "gaussian", "--n", "1000", "--dim", "16",
                         "--out", g])
        run(opts.after, ["create", "--db", db, "--collection", "c", "--kind", "gaussian",
                         "--dim", "16"])
        run(opts.after, ["ingest", "--db", db, "--collection", "c", "--mean", g + ".mean.npy",
                         "--var", g + ".var.npy"])
        commands = {
            "--help": ["--help"],
            "list": ["list", "--db", db],
            "stats": ["stats", "--db", db, "--collection", "c"],
            "search": ["search", "--db", db, "--collection", "c", "--mean",
                       g + ".query.mean.npy", "--var", g + ".query.var.npy", "--k", "5"],
            "train --help": ["train", "--help"],
        }
        print(f"{opts.runs} runs each, median wall time; libs = shared libraries loaded")
        print("| command | before s | after s | before/after | CPU before s | CPU after s "
              "| before libs | after libs |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, args in commands.items():
            times = {which: [] for which in binaries}
            for which, binary in binaries.items():
                seconds(binary, args)  # warm the page cache
            for _ in range(opts.runs):
                for which, binary in binaries.items():
                    times[which].append(seconds(binary, args))
            wall = {w: statistics.median(t[0] for t in times[w]) for w in binaries}
            cpu = {w: statistics.median(t[1] for t in times[w]) for w in binaries}
            libs = {which: libraries(binary, args) for which, binary in binaries.items()}
            print(f"| `hedgedb {name}` | {wall['before']:.3f} | {wall['after']:.3f} "
                  f"| {wall['before'] / wall['after']:.1f}x | {cpu['before']:.3f} "
                  f"| {cpu['after']:.3f} | {libs['before']} | {libs['after']} |")


if __name__ == "__main__":
    main()
