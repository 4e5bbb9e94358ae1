#!/usr/bin/python3
"""Churn runbook: a sliding window of drifting data, searched throughout.

    PYTHONPATH=build/python nice -n 19 /usr/bin/python3 bench/churn_run.py --dir /tmp/churn
    # the full run (hours): insert 5M, keep the newest 1M
    PYTHONPATH=build/python nice -n 19 /usr/bin/python3 bench/churn_run.py --dir /big \\
        --total 5000000 --window 1000000 --batch 50000 --dim 64 --checkpoints 10

Items are Gaussians (bench/clustered_gaussians.py's shape: a centre plus
N(0, 0.3^2) mean noise, variances U(0.02, 0.2)) whose distribution drifts
with the stream position p (0 at the first item, 1 at the last): of
--centres cluster centres (standard normal) only a window of --active ones
is drawn from, and that window slides from the first centres to the last as
p goes from 0 to 1 (new clusters appear, old ones die out); every centre also
moves by p times its own N(0, --move^2) offset. IVF lists trained on the first
items therefore fit the later ones worse and worse.

Items are ingested in batches of --batch with sequential ids; once more than
--window are live, the oldest are removed (one remove per batch), so the
collection holds the newest --window. Between batches --searches-per-batch
single queries of the current distribution are searched (the traffic that
meets the collection while it changes; also what trains the index).

At --checkpoints evenly spaced points (and at the end) it measures, on
--queries queries drawn from the current distribution:
  recall@10 of the default search against the exhaustive (exact) top-10 of
  the same collection; the collection's stats (index_recall_estimate,
  index_nprobe and, where the collection reports them, its upkeep fields);
and the same for a reference: a freshly built collection of the same live
items (same ids, data and order; a new index trained on them), recall
against the same exact top-10.

Latency is timed fairly between the two: after a warm-up pass of every query
on both, --repeats rounds each time every query once per collection, in the
same process and interleaved (query i on one collection, then on the other;
which goes first alternates with i and with the round), so that whatever the
machine does meanwhile (other processes on shared cores, the page cache)
falls on both alike. Each timed call is a sample: p50 / p99 are over
--queries x --repeats samples per collection (600 by default, so p99 is not
one or two calls), p99_ratio is churned p99 / fresh p99 over them, and
p99_ratio_rounds gives the median [min, max] of the per-round ratios (each
round's p99 over --queries samples) as its spread. On shared cores a call
the scheduler preempts takes a time slice (ms, against tens of us for a
search): slow_calls counts the calls over 10 times the p50, and when they
are near 1% of the samples p99 is the scheduler's; p99_fastest_ms and
p99_fastest_ratio take each query's fastest call over the rounds instead
(p99 over --queries values), which filters most of them. retrain_during_timing
says whether a background retrain of the churned collection was running
during its timed queries (its stats' index_retraining, sampled before,
between and after the rounds, or index_retrains grew meanwhile): a retrain
takes a core from the searches, a cause of a high ratio other than the
index itself. --no-reference times the churned collection alone.

--during-retrain times every checkpoint while a retrain runs: it opens the
churned collection with index_retrain_recall=1 (each check retrains; give
--open-option index_retrain_recall=... to override), and just before the
timing it upserts the newest live items again, unchanged (batches of
--batch, so the live items and the exact top-10 stay the same), until a
check has started a background retrain; retraining_probes then lists
index_retraining before, between and after the rounds (how much of the
timing the retrain covered), and retrain_upserts how many items it took.

Prints one JSON object per checkpoint, then a Markdown table; --plot FILE
draws recall and p99 over the stream (matplotlib). Default sizes finish in a
few minutes on 2 cores.
"""

import argparse
import json
import os
import shutil
import statistics
import time

import numpy as np


class DriftingSource:
    """The data distribution at stream position p in [0, 1]."""

    def __init__(self, rng, dim, centres, active, move):
        self.rng = rng
        self.base = rng.normal(size=(centres, dim)).astype(np.float32)
        self.offset = (move * rng.normal(size=(centres, dim))).astype(np.float32)
        self.active = min(active, centres)

    def draw(self, n, p):
        first = int(round(p * (len(self.base) - self.active)))
        labels = first + self.rng.integers(0, self.active, size=n)
        centres = self.base[labels] + np.float32(p) * self.offset[labels]
        dim = self.base.shape[1]
        mean = (centres + 0.3 * self.rng.normal(size=(n, dim))).astype(np.float32)
        var = self.rng.uniform(0.02, 0.2, size=(n, dim)).astype(np.float32)
        return mean, var


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def exact_top10(db, name, qmean, qvar):
    return np.asarray(db.search(name, mean=qmean, var=qvar, k=10, exhaustive=True,
                                with_uncertainty=False).ids)


def recall_at_10(db, name, qmean, qvar, exact):
    """The default search's recall@10 against `exact` (untimed)."""
    hits = 0
    for q in range(len(qmean)):
        r = db.search(name, mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10, with_uncertainty=False)
        hits += len(set(np.asarray(r.ids)[0].tolist()) & set(exact[q].tolist()) - {-1})
    return round(hits / max(int(np.sum(exact >= 0)), 1), 4)


def time_interleaved(targets, qmean, qvar, repeats, probe=None):
    """Single-query latency of each (db, name) in `targets`, timed in turns:
    a warm-up pass of every query on each, then `repeats` rounds in which
    query i runs once on every target, the target that goes first rotating
    with i and the round. Returns, per target, the rounds' lists of seconds
    (round r, query i). `probe` (if given) is called before, between and
    after the rounds (outside the timing)."""
    nq, nt = len(qmean), len(targets)
    for q in range(nq):
        for db, name in targets:
            db.search(name, mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10, with_uncertainty=False)
    times = [[[0.0] * nq for _ in range(repeats)] for _ in range(nt)]
    for rnd in range(repeats):
        if probe:
            probe()
        for q in range(nq):
            for j in range(nt):
                t_index = (j + q + rnd) % nt
                db, name = targets[t_index]
                t = time.perf_counter()
                db.search(name, mean=qmean[q:q + 1], var=qvar[q:q + 1], k=10,
                          with_uncertainty=False)
                times[t_index][rnd][q] = time.perf_counter() - t
    if probe:
        probe()
    return times


def fastest_per_query(rounds):
    """Each query's fastest call over the rounds."""
    return [min(calls) for calls in zip(*rounds)]


def latency_fields(rounds):
    """p50 / p99 over every timed call of one target, the sample count, the
    calls slower than 10 times the p50 (on shared cores: mostly calls the
    scheduler preempted, a time slice each), and p99 over the queries of each
    query's fastest call (what is left once those are filtered out)."""
    flat = [t for r in rounds for t in r]
    p50 = statistics.median(flat)
    return {"p50_ms": round(1000 * p50, 3),
            "p99_ms": round(1000 * percentile(flat, 0.99), 3),
            "samples": len(flat),
            "slow_calls": sum(t > 10 * p50 for t in flat),
            "p99_fastest_ms": round(1000 * percentile(fastest_per_query(rounds), 0.99), 3)}


def ratio_fields(churned, fresh):
    """churned p99 / fresh p99 over all samples, over each round, and over
    each query's fastest call."""
    all_c = [t for r in churned for t in r]
    all_f = [t for r in fresh for t in r]
    per_round = [percentile(c, 0.99) / max(percentile(f, 0.99), 1e-12)
                 for c, f in zip(churned, fresh)]
    best_c = percentile(fastest_per_query(churned), 0.99)
    best_f = percentile(fastest_per_query(fresh), 0.99)
    return {"p99_ratio": round(percentile(all_c, 0.99) / max(percentile(all_f, 0.99), 1e-12), 2),
            "p99_ratio_rounds": [round(statistics.median(per_round), 2),
                                 round(min(per_round), 2), round(max(per_round), 2)],
            "p99_fastest_ratio": round(best_c / max(best_f, 1e-12), 2),
            "p50_ratio": round(statistics.median(all_c) / max(statistics.median(all_f), 1e-12),
                               2)}


def start_retrain(db, name, window_mean, window_var, window_ids, batch):
    """Upserts the newest live items again, unchanged, a batch at a time,
    until the collection reports a background retrain running or done (a
    check that the changes made due, with index_retrain_recall = 1, starts
    one). Returns
    the items upserted; raises if every live item went by without one."""
    mean = np.concatenate(window_mean)[::-1]
    var = np.concatenate(window_var)[::-1]
    ids = np.concatenate(window_ids)[::-1]
    done = 0
    before = db.stats(name).get("index_retrains", 0)
    while done < len(ids):
        n = min(batch, len(ids) - done)
        db.ingest(name, mean=np.ascontiguousarray(mean[done:done + n]),
                  var=np.ascontiguousarray(var[done:done + n]),
                  ids=np.ascontiguousarray(ids[done:done + n]), upsert=True)
        done += n
        st = db.stats(name)
        # A small index may have retrained already (then the probes show it).
        if st.get("index_retraining", False) or st.get("index_retrains", 0) > before:
            return done
    raise RuntimeError(f"no retrain started after upserting all {done} live items "
                       "(is index_recheck_fraction 0, or index_retrain_recall below 1?)")


def upkeep_fields(stats):
    """The stats that say how the index is kept (whatever this build reports)."""
    keys = ("index_recall_estimate", "index_nprobe", "index_vectors", "index_sequence")
    out = {k: stats[k] for k in keys if k in stats}
    for k, v in stats.items():
        if k.startswith("index_upkeep") or k.startswith("index_checked") or \
                k.startswith("index_retrain") or k.startswith("index_changes") or \
                k.startswith("index_imbalance"):
            out[k] = v
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="an empty directory with room for two databases")
    parser.add_argument("--total", type=int, default=300000, help="items inserted in all")
    parser.add_argument("--window", type=int, default=100000, help="newest items kept")
    parser.add_argument("--batch", type=int, default=5000, help="items per ingest (and remove)")
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--centres", type=int, default=400)
    parser.add_argument("--active", type=int, default=100, help="centres drawn from at a time")
    parser.add_argument("--move", type=float, default=1.0, help="std of each centre's drift")
    parser.add_argument("--checkpoints", type=int, default=6)
    parser.add_argument("--queries", type=int, default=200, help="queries per checkpoint")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed rounds per checkpoint: each times every query once on "
                             "each collection, interleaved (p99 over queries x repeats samples)")
    parser.add_argument("--searches-per-batch", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the freshly built collection at each checkpoint")
    parser.add_argument("--during-retrain", action="store_true",
                        help="time each checkpoint while a background retrain runs (see above)")
    parser.add_argument("--plot", help="PNG of recall and p99 over the stream")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--open-option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra hedgedb.open keyword (number), e.g. index_recheck_fraction=0")
    args = parser.parse_args()
    if args.window <= 0 or args.total < args.window or args.batch <= 0:
        parser.error("need 0 < --window <= --total and --batch > 0")
    if args.checkpoints <= 0 or args.queries <= 0 or args.repeats <= 0:
        parser.error("--checkpoints, --queries and --repeats must be > 0")
    if args.queries * args.repeats < 500:
        print(f"note: {args.queries} queries x {args.repeats} repeats = "
              f"{args.queries * args.repeats} samples per collection: p99 rests on "
              f"{max(1, args.queries * args.repeats // 100)} of them", flush=True)
    import hedgedb

    if os.path.exists(args.dir) and os.listdir(args.dir):
        parser.error(f"{args.dir} is not empty: give an empty --dir")
    os.makedirs(args.dir, exist_ok=True)
    open_kwargs = {"threads": args.threads}
    if args.during_retrain:
        open_kwargs["index_retrain_recall"] = 1.0
    for kv in args.open_option:
        key, _, value = kv.partition("=")
        try:
            open_kwargs[key] = float(value) if "." in value else int(value)
        except ValueError:
            parser.error(f"--open-option {kv}: the value must be a number")

    rng = np.random.default_rng(args.seed)
    source = DriftingSource(rng, args.dim, args.centres, args.active, args.move)
    path = os.path.join(args.dir, "churn_db")
    db = hedgedb.open(path, **open_kwargs)
    db.create_collection("c", kind="gaussian", dim=args.dim, match_a=1.0, match_b=5.0)

    window_mean, window_var, window_ids = [], [], []  # the live batches, oldest first
    live = 0
    next_id = 0
    marks = sorted({min(args.total, int(round(args.total * (i + 1) / args.checkpoints)))
                    for i in range(args.checkpoints)})
    rows = []
    start = time.perf_counter()
    ingest_seconds = 0.0
    while next_id < args.total:
        n = min(args.batch, args.total - next_id)
        p = next_id / max(args.total - 1, 1)
        mean, var = source.draw(n, p)
        ids = np.arange(next_id, next_id + n, dtype=np.int64)
        t = time.perf_counter()
        db.ingest("c", mean=mean, var=var, ids=ids)
        window_mean.append(mean)
        window_var.append(var)
        window_ids.append(ids)
        live += n
        next_id += n
        while live > args.window:
            excess = live - args.window
            if len(window_ids[0]) <= excess:
                db.remove("c", window_ids[0])
                live -= len(window_ids[0])
                window_mean.pop(0), window_var.pop(0), window_ids.pop(0)
            else:
                db.remove("c", window_ids[0][:excess])
                window_mean[0] = window_mean[0][excess:]
                window_var[0] = window_var[0][excess:]
                window_ids[0] = window_ids[0][excess:]
                live -= excess
        ingest_seconds += time.perf_counter() - t
        if args.searches_per_batch:
            qm, qv = source.draw(args.searches_per_batch, p)
            for q in range(len(qm)):
                db.search("c", mean=qm[q:q + 1], var=qv[q:q + 1], k=10, with_uncertainty=False)
        if marks and next_id >= marks[0]:
            marks.pop(0)
            qmean, qvar = source.draw(args.queries, p)
            exact = exact_top10(db, "c", qmean, qvar)
            row = {"inserted": next_id, "live": live, "progress": round(p, 3),
                   "elapsed_s": round(time.perf_counter() - start, 1)}
            ref, ref_path = None, None
            if not args.no_reference:
                ref_path = os.path.join(args.dir, f"fresh_{next_id}")
                t = time.perf_counter()
                ref = hedgedb.open(ref_path, threads=args.threads)
                ref.create_collection("c", kind="gaussian", dim=args.dim, match_a=1.0,
                                      match_b=5.0)
                all_ids = np.concatenate(window_ids)
                all_mean = np.concatenate(window_mean)
                all_var = np.concatenate(window_var)
                for first in range(0, len(all_ids), 100000):
                    ref.ingest("c", mean=all_mean[first:first + 100000],
                               var=all_var[first:first + 100000],
                               ids=all_ids[first:first + 100000])
                ref.flush()
                row["fresh_build_s"] = round(time.perf_counter() - t, 1)
            if args.during_retrain:
                row["retrain_upserts"] = start_retrain(db, "c", window_mean, window_var,
                                                       window_ids, args.batch)
            # Whether the churned collection retrains while it is timed.
            seen = {"retraining": False, "retrains": [], "probes": []}

            def probe():
                st = db.stats("c")
                retraining = bool(st.get("index_retraining", False))
                seen["retraining"] |= retraining
                seen["probes"].append(retraining)
                seen["retrains"].append(st.get("index_retrains", 0))

            targets = [(db, "c")] + ([(ref, "c")] if ref is not None else [])
            times = time_interleaved(targets, qmean, qvar, args.repeats, probe)
            row["recall_at_10"] = recall_at_10(db, "c", qmean, qvar, exact)
            row.update(latency_fields(times[0]))
            row["retrain_during_timing"] = seen["retraining"] or \
                len(set(seen["retrains"])) > 1
            row["retraining_probes"] = "".join("R" if r else "-" for r in seen["probes"])
            row.update(upkeep_fields(db.stats("c")))
            if ref is not None:
                fresh = {"recall_at_10": recall_at_10(ref, "c", qmean, qvar, exact),
                         **latency_fields(times[1])}
                fstats = ref.stats("c")
                ref.close()
                shutil.rmtree(ref_path, ignore_errors=True)
                row.update({"fresh_" + k: v for k, v in fresh.items() if k != "samples"})
                row["fresh_nprobe"] = fstats.get("index_nprobe")
                row["fresh_recall_estimate"] = fstats.get("index_recall_estimate")
                if "index_imbalance" in fstats:
                    row["fresh_imbalance"] = fstats["index_imbalance"]
                row.update(ratio_fields(times[0], times[1]))
            print(json.dumps(row), flush=True)
            rows.append(row)
    db.close()
    total_s = time.perf_counter() - start
    print(json.dumps({"what": "total", "seconds": round(total_s, 1),
                      "write_seconds": round(ingest_seconds, 1),
                      "args": vars(args)}), flush=True)

    cols = ["inserted", "live", "recall_at_10", "fresh_recall_at_10", "p50_ms", "p99_ms",
            "fresh_p50_ms", "fresh_p99_ms", "samples", "slow_calls", "fresh_slow_calls",
            "p99_ratio", "p99_ratio_rounds", "p99_fastest_ratio", "index_nprobe", "fresh_nprobe",
            "index_recall_estimate", "index_retrains", "retrain_during_timing",
            "retraining_probes", "retrain_upserts"]
    cols = [c for c in cols if any(c in r for r in rows)]
    print()
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    def cell(v):
        if isinstance(v, list):  # p99_ratio_rounds: median [min, max]
            return f"{v[0]} [{v[1]}, {v[2]}]"
        return "yes" if v is True else "" if v is False else str(v)

    for r in rows:
        print("| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |")
    notes = [r.get("index_upkeep_note") for r in rows if r.get("index_upkeep_note")]
    if notes:
        print(f"\nlast upkeep note: {notes[-1]}")

    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        x = [r["inserted"] for r in rows]
        fig, (a, b) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
        a.plot(x, [r["recall_at_10"] for r in rows], "o-", label="churned collection")
        if "fresh_recall_at_10" in rows[0]:
            a.plot(x, [r["fresh_recall_at_10"] for r in rows], "s--", label="freshly built")
        a.axhline(0.95, color="grey", lw=0.8)
        a.set_ylabel("recall@10")
        a.legend()
        b.plot(x, [r["p99_ms"] for r in rows], "o-", label="churned collection")
        if "fresh_p99_ms" in rows[0]:
            b.plot(x, [r["fresh_p99_ms"] for r in rows], "s--", label="freshly built")
        b.set_ylabel("p99 latency (ms)")
        b.set_xlabel("items inserted")
        b.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)


if __name__ == "__main__":
    main()
