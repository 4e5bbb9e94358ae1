#!/usr/bin/env python3
"""`hedgedb backup --read-only` beside writers that keep opening and closing
the database, on purpose: every backup that exits 0 must hold every batch
acknowledged before it started.

A writer thread runs `hedgedb ingest` processes back to back (each opens the
database, which turns the previous process's write-ahead log into a table
file and deletes the log, ingests one batch, and closes; every --big-every'th
batch is large enough, >= 16 MiB of memtable, that closing writes it to a
table and deletes the log). Meanwhile the main thread takes backups with
--read-only. Before each backup it notes how many items were acknowledged (an
ingest process exited 0); after a backup that exits 0 it opens the copy
(`hedgedb stats`) and counts the items. A copy with fewer is a violation.
A backup that exits non-zero is counted as refused (allowed: it must say why).

Usage: bench/backup_race.py --bin build/bin/hedgedb [--trials 20] [--dim 64]
Exit code 1 if any backup that exited 0 lacked acknowledged items.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np


def run(binary, args, check=True):
    r = subprocess.run([binary] + args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin/hedgedb")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=200, help="items per small batch")
    ap.add_argument("--big", type=int, default=70000, help="items per big batch")
    ap.add_argument("--big-every", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    work = tempfile.mkdtemp(prefix="hedgedb-backup-race.")
    try:
        db = os.path.join(work, "db")
        run(args.bin, ["create", "--db", db, "--collection", "c", "--kind", "point",
                       "--dim", str(args.dim), "--index", "Flat"])
        small = os.path.join(work, "small.npy")
        big = os.path.join(work, "big.npy")
        np.save(small, rng.standard_normal((args.batch, args.dim)).astype(np.float32))
        np.save(big, rng.standard_normal((args.big, args.dim)).astype(np.float32))
        acked = [0]
        lock = threading.Lock()
        stop = threading.Event()
        writer_errors = []

        def writer():
            n = 0
            while not stop.is_set():
                n += 1
                is_big = n % args.big_every == 0
                r = run(args.bin, ["ingest", "--db", db, "--collection", "c",
                                   "--vec", big if is_big else small], check=False)
                if r.returncode != 0:
                    # A backup's reader never locks the database: every
                    # ingest must succeed.
                    writer_errors.append(r.stderr.strip())
                    continue
                with lock:
                    acked[0] += args.big if is_big else args.batch

        thread = threading.Thread(target=writer)
        thread.start()
        ok = refused = violations = 0
        try:
            time.sleep(0.5)
            for t in range(args.trials):
                with lock:
                    before = acked[0]
                to = os.path.join(work, f"b{t}")
                r = run(args.bin, ["backup", "--read-only", "--db", db, "--to", to], check=False)
                if r.returncode != 0:
                    refused += 1
                    print(f"trial {t}: refused (exit {r.returncode}): {r.stderr.strip()[:300]}")
                    if os.path.exists(to) and os.listdir(to):
                        violations += 1
                        print(f"trial {t}: VIOLATION: a refused backup left files in {to}")
                    shutil.rmtree(to, ignore_errors=True)
                    continue
                s = run(args.bin, ["stats", "--db", to, "--collection", "c"], check=False)
                items = json.loads(s.stdout)["items"] if s.returncode == 0 else -1
                if items < before:
                    violations += 1
                    print(f"trial {t}: VIOLATION: backup exited 0 with {items} items, "
                          f"{before} were acknowledged before it started "
                          f"(backup said {r.stdout.strip()[:200]}; stats: {s.stderr.strip()[:200]})")
                else:
                    ok += 1
                shutil.rmtree(to, ignore_errors=True)
        finally:
            stop.set()
            thread.join()
        print(json.dumps({"trials": args.trials, "ok": ok, "refused": refused,
                          "violations": violations, "acknowledged": acked[0],
                          "writer_errors": len(writer_errors)}))
        for e in writer_errors[:3]:
            print("writer error:", e)
        return 1 if violations or writer_errors else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
