#!/usr/bin/python3
"""hedgedb against the pipeline a practitioner writes today, in one process.

    PYTHONPATH=build/python /usr/bin/python3 bench/practitioner_compare.py \
        --items 100000 --out /tmp/compare [--score mls]

Needs python3-faiss, python3-hnswlib, python3-torch and (for the picture)
python3-matplotlib, all Debian packages.

The data: N clustered Gaussians (D = 64, 1,000 clusters, mean noise 0.3,
variances uniform in [0.02, 0.2]), queries drawn the same way but not
stored. The target: each query's exact top-10 under the `mc` score (HIB
eq. 5, K = 8 samples per side), or with --score mls under the mutual
likelihood score, from an exhaustive hedgedb search.

The pipelines, all on one thread (torch, FAISS's OpenMP, hedgedb threads=1):
  hedgedb          two-stage search (its IVF index, then exact MC rescoring),
                   swept over nprobe and the candidate count; the index is
                   the collection's default (IVF1024,Flat) or --index's
                   factory, e.g. IVF1024,SQ8 (8-bit lists: a quarter of the
                   bytes a query reads);
  faiss+torch      FAISS IndexIVFFlat on the means (same list count as the
                   collection's index) for C candidates, then Monte Carlo
                   rescoring in PyTorch with the same sample banks (mls:
                   the closed form in PyTorch, float32);
  hnswlib+torch    hnswlib (M 16, ef_construction 200) on the means for C
                   candidates, then the same rescoring;
  faiss sq8+torch  with --index ...,SQ8 only: FAISS IndexIVFScalarQuantizer
                   (QT_8bit, residuals, the same list count) on the means,
                   then the same rescoring: the practitioner's pipeline with
                   the same list encoding as hedgedb's;
  faiss means      FAISS IVF top-10 on the means alone (no rescoring: what a
                   point-embedding database returns).
The sample banks are hedgedb's own (docs/concepts.md, "Determinism":
xoshiro256** seeded through splitmix64, Box-Muller in double precision),
rewritten here in Python from that description; the script checks that
the torch scores of the exact top-10 equal hedgedb's before it times
anything, so both compute one score: mc to 1e-5 absolute (probabilities);
mls to 2e-5 (1 + |score|), since both sum 64 float32 terms of magnitude
about |score| / 64 in different orders (each sum's error is a few
2^-24 sum |terms| ~ 1e-6 |score| at D = 64; the bound leaves room for
D up to a few hundred).

Each configuration is timed one query per call and in batches of 100
queries, over interleaved rounds (median); recall@10 is against the exact
top-10. Writes OUT/compare.json (every point), OUT/compare.png (recall@10
against queries per second, like ann-benchmarks' plots; compare-mls.* with
--score mls) and prints a
table: for each recall level, the fastest configuration of each pipeline
that reaches it and hedgedb's ratio to the fastest other pipeline.
"""

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

import clustered_gaussians
from machine import cpu_model

MASK = (1 << 64) - 1


# ---- hedgedb's sample banks, from their description -----------------------

def _splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


def normal_bank(seed, stream, count):
    """The first `count` standard normals of hedgedb's stream (seed, stream)."""
    _, first = _splitmix64(seed & MASK)
    key = first ^ ((stream * 0xD1B54A32D192ED03) & MASK)
    s, state = [], key
    for _ in range(4):
        state, word = _splitmix64(state)
        s.append(word)
    out = np.empty(count, dtype=np.float32)

    def next_open_unit():
        result = (_rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return ((result >> 11) + 1.0) * 2.0 ** -53

    for i in range(0, count, 2):
        u1, u2 = next_open_unit(), next_open_unit()
        radius = math.sqrt(-2.0 * math.log(u1))
        out[i] = radius * math.cos(2 * math.pi * u2)
        if i + 1 < count:
            out[i + 1] = radius * math.sin(2 * math.pi * u2)
    return out


QUERY_STREAM, ITEM_STREAM = 1, 2  # query/scorer.h


# ---- the practitioner's rescoring ----------------------------------------

class TorchRescore:
    """Scores of each query's candidates (subclasses: scores()), best k."""

    def top(self, qmean, qvar, cand, k):
        # Queries in chunks of about 4 MB of item data per chunk: one block
        # for a batch of 100 queries at C = 500 would be 100 MB.
        per_query = cand.shape[1] * self.floats_per_candidate * 4
        step = max(1, (4 << 20) // per_query)
        with self.torch.inference_mode():
            s = np.concatenate([self.scores(qmean[i:i + step], qvar[i:i + step], cand[i:i + step])
                                for i in range(0, len(cand), step)])
        order = np.argsort(-s, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(cand, order, 1), np.take_along_axis(s, order, 1)


class TorchMls(TorchRescore):
    """PFE's mutual likelihood score, -1/2 sum_d [(mu_q - mu)^2 / s + ln s]
    - D/2 ln(2 pi) with s = var_q + var, of each query's candidates."""

    def __init__(self, torch, mean, var):
        self.torch = torch
        self.mean = torch.from_numpy(mean)
        self.var = torch.from_numpy(var)
        self.const = 0.5 * mean.shape[1] * math.log(2 * math.pi)
        self.floats_per_candidate = 2 * mean.shape[1]

    def scores(self, qmean, qvar, cand):
        torch = self.torch
        cand_t = torch.from_numpy(np.maximum(cand, 0))
        s = torch.from_numpy(qvar)[:, None, :] + self.var[cand_t]  # (Q, C, D)
        d = torch.from_numpy(qmean)[:, None, :] - self.mean[cand_t]
        p = (-0.5 * (d * d / s + torch.log(s)).sum(2) - self.const).numpy()
        p[cand < 0] = -np.inf
        return p


class TorchMc(TorchRescore):
    """Monte Carlo match probability (mean over K x K pairs of
    sigmoid(-a ||zq_i - z_j|| + b)) of each query's candidates."""

    def __init__(self, torch, mean, var, a, b, samples, seed):
        self.torch = torch
        self.mean = torch.from_numpy(mean)
        self.sd = torch.from_numpy(np.sqrt(var))
        self.a, self.b, self.k = a, b, samples
        d = mean.shape[1]
        self.eq = torch.from_numpy(normal_bank(seed, QUERY_STREAM, samples * d).reshape(samples, d))
        self.ei = torch.from_numpy(normal_bank(seed, ITEM_STREAM, samples * d).reshape(samples, d))
        self.floats_per_candidate = samples * d

    def scores(self, qmean, qvar, cand):
        """qmean, qvar (Q, D); cand (Q, C) int64 item rows (-1: none).
        Returns (Q, C) float32 scores, -inf where cand is -1."""
        torch = self.torch
        cand_t = torch.from_numpy(np.maximum(cand, 0))
        zq = (torch.from_numpy(qmean)[:, None, :] +
              torch.from_numpy(np.sqrt(qvar))[:, None, :] * self.eq[None])  # (Q, K, D)
        m, sd = self.mean[cand_t], self.sd[cand_t]  # (Q, C, D)
        zi = m[:, :, None, :] + sd[:, :, None, :] * self.ei[None, None]  # (Q, C, K, D)
        q, c = cand.shape
        zi = zi.reshape(q, c * self.k, -1)
        # ||x - y||^2 = |x|^2 + |y|^2 - 2 x.y, one batched matrix product
        # (faster here than torch.cdist, whose batched form is slow on CPU).
        d2 = torch.baddbmm((zi * zi).sum(2, keepdim=True), zi, zq.transpose(1, 2), alpha=-2.0)
        dist = (d2 + (zq * zq).sum(2)[:, None, :]).clamp_min_(0).sqrt_()  # (Q, C*K, K)
        p = torch.sigmoid(self.b - self.a * dist).reshape(q, c, self.k * self.k).mean(2)
        p = p.numpy()
        p[cand < 0] = -np.inf
        return p


def recall(found, exact):
    hits = sum(len(set(f.tolist()) & set(e.tolist())) for f, e in zip(found, exact))
    return hits / exact.size


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    clustered_gaussians.add_arguments(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--score", choices=("mc", "mls"), default="mc",
                        help="the score of the target and of every rescoring (default mc)")
    parser.add_argument("--out", required=True, help="directory for compare.json and compare.png")
    parser.add_argument("--index", default="",
                        help="hedgedb's index factory, an IVF one (default: the collection's "
                             "default); the outputs' names carry it: compare-IVF1024_SQ8.*")
    parser.add_argument("--quick", action="store_true",
                        help="fewer configurations (a check that the script runs)")
    args = parser.parse_args()
    for name in ("faiss", "hnswlib", "torch", "hedgedb"):
        try:
            __import__(name)
        except ImportError:
            sys.exit(f"{name} is not importable: apt-get install python3-faiss python3-hnswlib "
                     "python3-torch, and PYTHONPATH=build/python for hedgedb")
    import faiss
    import hnswlib
    import torch
    import hedgedb

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    a, b, seed = 1.0, 5.0, 0

    rng = np.random.default_rng(0)
    centres = clustered_gaussians.centers(rng, args.dim)
    mean, var = clustered_gaussians.draw(rng, centres, args.items)
    qmean, qvar = clustered_gaussians.draw(rng, centres, args.queries)
    rescore = (TorchMc(torch, mean, var, a, b, args.samples, seed) if args.score == "mc"
               else TorchMls(torch, mean, var))
    points = []
    with tempfile.TemporaryDirectory(dir=args.out) as work, \
            hedgedb.open(work + "/db", threads=1) as db:
        start = time.perf_counter()
        db.create_collection("g", kind="gaussian", dim=args.dim, match_a=a, match_b=b,
                             samples=args.samples, seed=seed, index=args.index)
        ids = np.arange(args.items, dtype=np.int64)
        for first in range(0, args.items, 100000):
            db.ingest("g", mean=mean[first:first + 100000], var=var[first:first + 100000],
                      ids=ids[first:first + 100000])
        db.flush()
        stats = db.stats("g")
        described = re.match(r"IVF(\d+)", stats["index_description"])
        if not stats["index_trained"] or not described:
            sys.exit(f"the collection's index is {stats['index_description']!r}, trained "
                     f"{stats['index_trained']}: this comparison needs a trained IVF index "
                     "(more items)")
        nlist = int(described.group(1))
        sq8 = stats["index_description"].endswith(",SQ8")
        print(f"hedgedb: {args.items} items ingested and indexed in "
              f"{time.perf_counter() - start:.1f} s; index {stats['index_description']}, "
              f"tuned nprobe {stats['index_nprobe']}", file=sys.stderr)

        exact_res = db.search("g", mean=qmean, var=qvar, k=10, exhaustive=True,
                              score=args.score, with_uncertainty=False)
        exact = np.asarray(exact_res.ids)
        exact_scores = np.asarray(exact_res.scores)
        # One score: torch's numbers for hedgedb's exact top-10.
        with torch.inference_mode():
            check = rescore.scores(qmean, qvar, exact)
        diff = np.abs(check - exact_scores)
        worst = float(np.max(diff))
        print(f"torch vs hedgedb scores of the exact top-10: max |diff| {worst:.2e}",
              file=sys.stderr)
        if args.score == "mls":
            # Relative to 1 + |score| (see above).
            worst = float(np.max(diff / (1 + np.abs(exact_scores))))
            print(f"  max |diff| / (1 + |score|) {worst:.2e}; scores in "
                  f"[{exact_scores.min():.1f}, {exact_scores.max():.1f}]", file=sys.stderr)
        allowed = 1e-5 if args.score == "mc" else 2e-5
        if worst > allowed:
            sys.exit(f"the torch rescoring does not compute hedgedb's {args.score} score "
                     f"({worst:.2e} > {allowed:.0e})")

        # Stage-1 structures of the other pipelines.
        start = time.perf_counter()
        quantizer = faiss.IndexFlatL2(args.dim)
        ivf = faiss.IndexIVFFlat(quantizer, args.dim, nlist)
        ivf.train(mean[rng.choice(args.items, min(args.items, 256 * nlist), replace=False)])
        ivf.add(mean)
        faiss_build = time.perf_counter() - start
        # The same list encoding as hedgedb's, where hedgedb's lists are SQ8.
        ivf_sq8 = None
        if sq8:
            ivf_sq8 = faiss.IndexIVFScalarQuantizer(quantizer, args.dim, nlist,
                                                    faiss.ScalarQuantizer.QT_8bit,
                                                    faiss.METRIC_L2)
            ivf_sq8.train(mean[rng.choice(args.items, min(args.items, 256 * nlist),
                                          replace=False)])
            ivf_sq8.add(mean)
        start = time.perf_counter()
        hnsw = hnswlib.Index(space="l2", dim=args.dim)
        # The graph takes long to build at 1M on one thread (15 minutes): it
        # is kept in OUT for the next run on the same data.
        # Named by a digest of the means, so a graph of other data is never read.
        digest = hashlib.sha1(mean.tobytes()).hexdigest()[:16]
        hnsw_file = os.path.join(args.out, f"hnsw_{args.items}_{args.dim}_{digest}.bin")
        if os.path.exists(hnsw_file):
            hnsw.load_index(hnsw_file, max_elements=args.items)
        else:
            hnsw.init_index(max_elements=args.items, M=16, ef_construction=200, random_seed=0)
            hnsw.set_num_threads(1)
            hnsw.add_items(mean, ids)
            hnsw.save_index(hnsw_file)
        hnsw.set_num_threads(1)
        hnsw_build = time.perf_counter() - start
        print(f"FAISS IVF{nlist},Flat built in {faiss_build:.1f} s, hnswlib in "
              f"{hnsw_build:.1f} s", file=sys.stderr)

        nprobes = [1, 4, 16] if args.quick else [1, 2, 4, 8, 16, 32]
        cands = [50, 200] if args.quick else [20, 50, 100, 200, 500]
        efs = [32, 128] if args.quick else [16, 32, 64, 128, 256]

        def hedgedb_run(nprobe, c):
            def f(lo, hi):
                r = db.search("g", mean=qmean[lo:hi], var=qvar[lo:hi], k=10, nprobe=nprobe,
                              candidates=c, score=args.score, with_uncertainty=False)
                return np.asarray(r.ids)
            return f

        def ivf_torch_run(index, nprobe, c):
            # A FAISS IVF (float or 8-bit lists) for the candidates, PyTorch
            # rescoring them.
            def f(lo, hi):
                index.nprobe = nprobe
                _, cand = index.search(qmean[lo:hi], c)
                return rescore.top(qmean[lo:hi], qvar[lo:hi], cand, 10)[0]
            return f

        def hnsw_torch_run(ef, c):
            def f(lo, hi):
                hnsw.set_ef(max(ef, c))
                cand, _ = hnsw.knn_query(qmean[lo:hi], k=c)
                return rescore.top(qmean[lo:hi], qvar[lo:hi], cand.astype(np.int64), 10)[0]
            return f

        def means_run(nprobe):
            def f(lo, hi):
                ivf.nprobe = nprobe
                return ivf.search(qmean[lo:hi], 10)[1]
            return f

        configs = []
        for nprobe in nprobes:
            for c in cands:
                configs.append(("hedgedb", f"nprobe {nprobe}, candidates {c}", hedgedb_run(nprobe, c)))
                configs.append(("faiss+torch", f"nprobe {nprobe}, C {c}",
                                ivf_torch_run(ivf, nprobe, c)))
                if sq8:
                    configs.append(("faiss sq8+torch", f"nprobe {nprobe}, C {c}",
                                    ivf_torch_run(ivf_sq8, nprobe, c)))
            configs.append(("faiss means", f"nprobe {nprobe}", means_run(nprobe)))
        for ef in efs:
            for c in cands:
                if c <= 2 * ef:
                    configs.append(("hnswlib+torch", f"ef {max(ef, c)}, C {c}", hnsw_torch_run(ef, c)))

        times = {(i, mode): [] for i in range(len(configs)) for mode in ("one", "batch")}
        found = {}
        q = args.queries
        for rnd in range(args.rounds):
            for i, (_, _, run) in enumerate(configs):
                start = time.perf_counter()
                out = [run(j, j + 1) for j in range(q)]
                times[(i, "one")].append((time.perf_counter() - start) / q)
                start = time.perf_counter()
                for j in range(0, q, args.batch):
                    run(j, min(q, j + args.batch))
                times[(i, "batch")].append((time.perf_counter() - start) / q)
                if rnd == 0:
                    found[i] = recall(np.concatenate(out), exact)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)

    for i, (pipeline, label, _) in enumerate(configs):
        for mode in ("one", "batch"):
            t = statistics.median(times[(i, mode)])
            points.append({"pipeline": pipeline, "config": label, "mode": mode,
                           "recall_at_10": found[i], "qps": 1.0 / t,
                           "ms_per_query": 1000 * t})
    meta = {"items": args.items, "dim": args.dim, "queries": args.queries,
            "rounds": args.rounds, "batch": args.batch, "samples": args.samples,
            "nlist": nlist, "index": stats["index_description"], "cpu": cpu_model(), "threads": 1, "score": args.score,
            "score_check_max_abs_diff": worst, "faiss": faiss.__version__,
            "torch": torch.__version__}
    stem = "compare" if args.score == "mc" else f"compare-{args.score}"
    if args.index:
        stem += "-" + re.sub(r"[^A-Za-z0-9]+", "_", args.index)
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump({"meta": meta, "points": points}, f, indent=1)

    others_of = ["faiss+torch"] + (["faiss sq8+torch"] if sq8 else []) + ["hnswlib+torch"]
    pipelines = ["hedgedb"] + others_of + ["faiss means"]
    print(f"{args.items} Gaussians, D = {args.dim}, score {args.score}"
          + (f", K = {args.samples}" if args.score == "mc" else "")
          + f", {args.queries} queries, {args.rounds} rounds, one thread; hedgedb's index "
          f"{meta['index']}; {meta['cpu']}")
    for mode, title in (("one", "one query per call"), ("batch", f"batches of {args.batch}")):
        print(f"\n{title}: fastest configuration reaching each recall@10 (q/s)")
        print("| recall@10 >= | " + " | ".join(pipelines) + " | hedgedb / best other |")
        print("|---" * (len(pipelines) + 2) + "|")
        for level in (0.90, 0.95, 0.98, 0.99):
            best = {}
            for p in pipelines:
                ok = [x for x in points if x["pipeline"] == p and x["mode"] == mode and
                      x["recall_at_10"] >= level]
                best[p] = max(ok, key=lambda x: x["qps"]) if ok else None
            cells = [f"{best[p]['qps']:,.0f} ({best[p]['config']}; {best[p]['recall_at_10']:.3f})"
                     if best[p] else "-" for p in pipelines]
            others = [best[p]["qps"] for p in others_of if best[p]]
            ratio = (f"{best['hedgedb']['qps'] / max(others):.2f}"
                     if best["hedgedb"] and others else "-")
            print(f"| {level:.2f} | " + " | ".join(cells) + f" | {ratio} |")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (python3-matplotlib): no picture", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    styles = {"hedgedb": ("C3", "o"), "faiss+torch": ("C0", "s"),
              "hnswlib+torch": ("C2", "^"), "faiss means": ("C7", "x"),
              "faiss sq8+torch": ("C1", "D")}
    for ax, (mode, title) in zip(axes, (("one", "one query per call"),
                                        ("batch", f"batches of {args.batch} queries"))):
        for p in pipelines:
            pts = [x for x in points if x["pipeline"] == p and x["mode"] == mode]
            # The Pareto front: the best recall at each speed or faster.
            pts.sort(key=lambda x: -x["qps"])
            front, best_r = [], -1.0
            for x in pts:
                if x["recall_at_10"] > best_r:
                    front.append(x)
                    best_r = x["recall_at_10"]
            color, marker = styles[p]
            ax.scatter([x["qps"] for x in pts], [x["recall_at_10"] for x in pts], color=color,
                       marker=marker, alpha=0.25, s=18)
            ax.plot([x["qps"] for x in front], [x["recall_at_10"] for x in front], color=color,
                    marker=marker, label=p)
        ax.set_xscale("log")
        ax.set_xlabel("queries per second (one thread, log scale)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(f"recall@10 against the exact {args.score} top-10")
    axes[0].legend(loc="lower left")
    fig.suptitle(f"{args.items:,} Gaussians, D = {args.dim}, score {args.score}"
                 + (f", K = {args.samples}" if args.score == "mc" else "") + ": "
                 f"hedgedb's index {meta['index']}; {meta['cpu']}", fontsize=10)
    fig.tight_layout()
    path = os.path.join(args.out, stem + ".png")
    fig.savefig(path, dpi=110)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
