#!/usr/bin/python3
"""Every performance figure of the second performance round in one run, as one table.

Runs the existing tools of a build tree (bench_scoring, driver_engine,
bench/cli_startup.py and, with --with-real, bench/real_embeddings.py) and prints
one markdown table (path, size, measured figure, target, met / not met / n/a),
headed by the CPU model (lscpu), the date and the load average.

    /usr/bin/python3 bench/run_all.py --build build --scale quick   # about 5 minutes
    /usr/bin/python3 bench/run_all.py --build build --scale full    # n = 1,000,000: 30-40 minutes

--scale quick uses small sizes (n = 100,000), so the size-dependent targets
(reopen, ingest of 1M, search speedup) are checked at that size; --scale full
uses the sizes the targets are stated for. A command that fails is reported as
"failed: <last stderr line>" and the others still run. --log FILE appends every
command line with its raw output. Standard library only.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FIGURES = ["mc", "dimco-scan", "dimco-topk", "floors", "reopen", "ingest", "search",
           "throughput", "paged", "cli", "real"]

SCALES = {
    # bench_scoring flags, driver_engine sizes, cli_startup runs, command timeout (s)
    "quick": dict(bench=["--benchmark_min_time=0.2"], n=100000, search_queries=200,
                  tp_queries=500, paged_queries=100, cli_runs=5, timeout=1800),
    "full": dict(bench=["--benchmark_min_time=0.5", "--benchmark_repetitions=3",
                        "--benchmark_report_aggregates_only=true"],
                 n=1000000, search_queries=200, tp_queries=1000, paged_queries=200, cli_runs=20,
                 timeout=4 * 3600),
}

NUM = r"([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"


class Failed(Exception):
    pass


class Runner:
    def __init__(self, log_path, timeout):
        self.log_path = log_path
        self.timeout = timeout

    def log(self, text):
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(text)

    def run(self, cmd, env=None, timeout=None):
        """Runs cmd; returns (returncode, stdout, stderr). Never raises on failure."""
        shown = " ".join(cmd)
        if env:
            shown = " ".join("%s=%s" % kv for kv in env.items()) + " " + shown
        print("+ " + shown, file=sys.stderr, flush=True)
        t0 = time.time()
        full_env = dict(os.environ, **(env or {}))
        try:
            p = subprocess.run(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, errors="replace", timeout=timeout or self.timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            out, err = as_text(e.stdout), as_text(e.stderr)
            rc, err = -1, err + "\ntimed out after %d s" % (timeout or self.timeout)
        except OSError as e:
            rc, out, err = -1, "", str(e)
        seconds = time.time() - t0
        print("  (%.1f s, exit %d)" % (seconds, rc), file=sys.stderr, flush=True)
        self.log("\n$ %s\n# %s, %.1f s, exit %d\n--- stdout\n%s\n--- stderr\n%s\n" % (
            shown, datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S UTC"), seconds, rc,
            out, err))
        return rc, out, err


def as_text(data):
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def last_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else "no output"


def check(rc, out, err):
    if rc != 0:
        raise Failed(last_line(err) if err.strip() else last_line(out))


def verdict(ok):
    if ok is None:
        return "n/a"
    return "met" if ok else "not met"


def fmt_n(n):
    return "{:,}".format(n)


def row(path, size, measured, target, ok):
    return [path, size, measured, target, verdict(ok) if not isinstance(ok, str) else ok]


# --- machine -----------------------------------------------------------------

def machine():
    info = {}
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout
        for line in out.splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                info[k.strip()] = v.strip()
    except OSError:
        pass
    flags = set(info.get("Flags", "").split())
    if not flags:
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = set(line.split(":", 1)[1].split())
                        break
        except OSError:
            pass
    return dict(model=info.get("Model name", "unknown"), family=info.get("CPU family", "?"),
                model_no=info.get("Model", "?"), cpus=info.get("CPU(s)", "?"),
                flags={f: f in flags for f in ("avx2", "avx512f", "avx512vbmi")})


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


# --- bench_scoring -------------------------------------------------------------

def bench_json(runner, build, scale, filt, binary="bench_scoring"):
    cmd = ["taskset", "-c", "1", os.path.join(build, "bin", binary),
           "--benchmark_filter=" + filt, "--benchmark_format=json"] + SCALES[scale]["bench"]
    rc, out, err = runner.run(cmd, env={"OMP_NUM_THREADS": "1"})
    check(rc, out, err)
    try:
        data = json.loads(out)
    except ValueError:
        raise Failed("unparsed: %s output is not JSON" % binary)
    results = {}
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") != "median":
                continue
        name = b.get("run_name", b.get("name", ""))
        results[name] = b
    return results


def ms(b, key):
    """Milliseconds of a benchmark's real_time / cpu_time."""
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b[key] * scale


def fig_mc(runner, build, scale, tmp):
    res = bench_json(runner, build, scale, "BM_McGaussian|BM_McMog2")
    rows = []
    for fam, label, target in (("BM_McGaussian", "MC rescoring, Gaussian K=8 D=64", 8.0),
                               ("BM_McMog2", "MC rescoring, MoG C=2 K=8 D=64", 6.0)):
        scalar = res.get(fam + "Scalar")
        kernels = [b for n, b in res.items() if n.startswith(fam + "Kernel/")]
        if not kernels:
            rows.append(row(label, "1,024 candidates", "unparsed: no kernel result",
                            ">= %g M candidates/s" % target, "n/a"))
            continue
        best = max(kernels, key=lambda b: b.get("items_per_second", 0))
        rate = best["items_per_second"] / 1e6
        text = "%.2f M/s (kernel %s, CPU time)" % (rate, best.get("label", "?"))
        if scalar and scalar.get("items_per_second"):
            text += "; scalar %.3f M/s (%.1fx)" % (scalar["items_per_second"] / 1e6,
                                                  best["items_per_second"] /
                                                  scalar["items_per_second"])
        rows.append(row(label, "1,024 candidates", text, ">= %g M candidates/s" % target,
                        rate >= target))
    return rows


def fig_dimco_scan(runner, build, scale, tmp):
    res = bench_json(runner, build, scale, "BM_CodesScanKernel|BM_CodesScan/")
    kernels = sorted((n, b) for n, b in res.items() if n.startswith("BM_CodesScanKernel/"))
    parts, chosen = [], None
    for n, b in kernels:
        label = b.get("label", n)
        if "(chosen)" in label:
            chosen = (label.replace(" (chosen)", ""), ms(b, "real_time"))
        parts.append("%s %.2f" % (label.replace(" (chosen)", "*"), ms(b, "real_time")))
    scan = res.get("BM_CodesScan/prepare:0")
    rows = []
    if scan:
        text = "ScoreRows %.3f ms CPU" % ms(scan, "cpu_time")
        if chosen:
            text += " (trial picks %s: %.3f ms wall)" % chosen
        rows.append(row("DIMCO scan k=d=256, chosen kernel", "5,924 items", text, "<= 0.3 ms",
                        ms(scan, "cpu_time") <= 0.3))
    else:
        rows.append(row("DIMCO scan k=d=256, chosen kernel", "5,924 items",
                        "unparsed: no BM_CodesScan/prepare:0", "<= 0.3 ms", "n/a"))
    if parts:
        rows.append(row("DIMCO scan k=d=256, per kernel (ms wall; * = chosen)", "5,924 items",
                        ", ".join(parts), "<= 0.3 ms (best kernel)",
                        min(ms(b, "real_time") for _, b in kernels) <= 0.3))
    return rows


def fig_dimco_topk(runner, build, scale, tmp):
    res = bench_json(runner, build, scale, "BM_CodesTopK1M|BM_FaissIndexPQ")
    rows = []
    b = res.get("BM_CodesTopK1M")
    if b:
        text = "%.2f ms CPU, %.2f ms wall" % (ms(b, "cpu_time"), ms(b, "real_time"))
        if "rescored" in b:
            text += ", %d rescored" % b["rescored"]
        if b.get("prescan") == 0:
            text += " (no pre-scan on this CPU: full scan)"
        rows.append(row("DIMCO exact top-10, k=16 d=64", "1,000,000 items", text, "<= 5 ms (CPU)",
                        ms(b, "cpu_time") <= 5.0))
    else:
        rows.append(row("DIMCO exact top-10, k=16 d=64", "1,000,000 items",
                        "unparsed: no BM_CodesTopK1M", "<= 5 ms", "n/a"))
    f = [v for n, v in res.items() if n.startswith("BM_FaissIndexPQ")]
    if f:
        rows.append(row("FAISS IndexPQ top-10 (comparison), k=d=256", "5,924 items",
                        "%.2f ms CPU, %.2f ms wall" % (ms(f[0], "cpu_time"), ms(f[0], "real_time")),
                        "-", "n/a"))
    return rows


def fig_floors(runner, build, scale, tmp):
    """bench_floors: the FMA peak and read bandwidth of this core, and each
    hot path's time over its floor's (bench/RESULTS.md, "Each hot path
    against its floor"). Its fixtures are fixed (1M vectors), whatever the
    scale."""
    res = bench_json(runner, build, scale, ".", binary="bench_floors")
    rows = []
    peak = res.get("BM_FloorFmaPeak/iterations:1", {}).get("GFLOP/s")
    bandwidth = res.get("BM_FloorReadBandwidth/iterations:1", {}).get("GB/s")
    rows.append(row("floors: FP32 FMA peak, read bandwidth (one core)", "-",
                    "%s GFLOP/s, %s GB/s" % ("%.1f" % peak if peak else "?",
                                             "%.1f" % bandwidth if bandwidth else "?"),
                    "-", "n/a"))
    paths = (("BM_McExhaustiveBatch100", "mc, 100 queries over the same rows", "100,000 rows"),
             ("BM_MlsExhaustiveOneQuery", "mls, one query, every row", "100,000 rows"),
             ("BM_Stage1ListScan1M/nprobe:16", "stage 1, IVF1024,Flat, nprobe 16", "1,000,000"),
             ("BM_Stage1ListScanSq8_1M/nprobe:16", "stage 1, IVF1024,SQ8, nprobe 16",
              "1,000,000"),
             ("BM_Stage1ListScan100kBatch100", "stage 1, batches of 100, nprobe 2", "100,000"))
    for name, label, size in paths:
        b = next((v for n, v in res.items() if n.startswith(name)), None)
        if b is None or "x_floor" not in b:
            rows.append(row(label + " / its floor", size, "unparsed", "<= 2x its floor", "n/a"))
            continue
        rows.append(row(label + " / its floor", size,
                        "%.2fx (%.3f ms)" % (b["x_floor"], ms(b, "real_time")),
                        "<= 2x its floor", b["x_floor"] <= 2.0))
    return rows


# --- driver_engine -------------------------------------------------------------

def driver(build):
    return os.path.join(build, "bin", "driver_engine")


def fig_reopen(runner, build, scale, tmp):
    n = SCALES[scale]["n"]
    d = tempfile.mkdtemp(prefix="reopen-", dir=tmp)
    rc, out, err = runner.run(["taskset", "-c", "1", driver(build), "reopen", "--n", str(n),
                               "--dim", "64", "--factories", "IVF1024,Flat", "--dir", d])
    shutil.rmtree(d, ignore_errors=True)
    check(rc, out, err)
    size = "%s Gaussians D=64" % fmt_n(n)
    m = re.search(r"reopen, index file and arena snapshot:\s+" + NUM + r" s(.*)", out)
    if not m:
        return [row("reopen, IVF1024,Flat", size, "unparsed", "<= 1 s at 1M", "n/a")]
    s = float(m.group(1))
    text = "%.2f s" % s
    src = re.search(r"arena from (\w+)", m.group(2))
    if src:
        text += " (arena from %s)" % src.group(1)
    r = re.search(r"rows decoded, snapshot written:\s+" + NUM + r" s", out)
    if r:
        text += "; rows decoded %.2f s" % float(r.group(1))
    r = re.search(r"no files \(index rebuilt[^:]*:\s+" + NUM + r" s", out)
    if r:
        text += "; rebuilt %.2f s" % float(r.group(1))
    ok = s <= 1.0
    return [row("reopen, IVF1024,Flat (index file + arena snapshot)", size, text, "<= 1 s at 1M",
                ok if n >= 1000000 else ("met at this n" if ok else "not met at this n"))]


def fig_ingest(runner, build, scale, tmp):
    n = SCALES[scale]["n"]
    d = tempfile.mkdtemp(prefix="ingest-", dir=tmp)
    rc, out, err = runner.run([driver(build), "ingest", "--n", str(n), "--dim", "64",
                               "--factories", "IVF1024,Flat", "--dir", d])
    shutil.rmtree(d, ignore_errors=True)
    check(rc, out, err)
    size = "%s Gaussians D=64" % fmt_n(n)
    rows = []
    for line in out.splitlines():
        if line.startswith("#") or "items/s" not in line:
            continue
        sync = re.search(r"sync=(\w+)", line)
        # The steady rate: the number after "then" (or "steady"), else the last items/s.
        rate = re.search(r"(?:then|steady)[^0-9]*" + NUM + r"\s*items/s", line)
        if not rate:
            rates = list(re.finditer(NUM + r"\s*items/s", line))
            rate = rates[-1] if rates else None
        first = re.search(r"first\s+([0-9]+)\s+items.*?" + NUM + r"\s*s\b", line)
        label = "ingest, IVF1024,Flat, WAL on" + (", sync=%s" % sync.group(1) if sync else "")
        if not rate:
            rows.append(row(label, size, "unparsed: " + line.strip(), ">= 150k items/s steady",
                            "n/a"))
            continue
        r = float(rate.group(1))
        text = "%s items/s steady" % fmt_n(int(round(r)))
        total = None
        if first:
            warm, s1 = int(first.group(1)), float(first.group(2))
            total = s1 + (n - warm) / r
            text += "; first %s items (incl. training) %.2f s; all %s in %.1f s" % (
                fmt_n(warm), s1, fmt_n(n), total)
            if n != 1000000:
                text += " (1M at this rate: %.1f s)" % (s1 + (1000000 - warm) / r)
        ok = r >= 150000 and (total is None or n != 1000000 or total <= 10.0)
        rows.append(row(label, size, text, ">= 150k items/s steady; 1M <= 10 s", ok))
    if not rows:
        rows.append(row("ingest, IVF1024,Flat, WAL on", size, "unparsed",
                        ">= 150k items/s steady; 1M <= 10 s", "n/a"))
    return rows


def fig_search(runner, build, scale, tmp):
    n, q = SCALES[scale]["n"], SCALES[scale]["search_queries"]
    d = tempfile.mkdtemp(prefix="search-", dir=tmp)
    rc, out, err = runner.run([driver(build), "search", "--n", str(n), "--queries", str(q),
                               "--factories", "IVF1024,Flat", "--dir", d])
    shutil.rmtree(d, ignore_errors=True)
    check(rc, out, err)
    size = "%s Gaussians D=64, %d queries" % (fmt_n(n), q)
    # The default: nprobe 16 (the fitted value on this clustered data), 10 x k = 100 candidates.
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 7 and f[0] == "IVF1024,Flat" and f[1] == "nprobe=16" and f[2] == "100":
            try:
                recall, msq, exh, speed = float(f[3]), float(f[4]), float(f[5]), float(f[6])
            except ValueError:
                break
            return [row("two-stage search, IVF1024,Flat default (nprobe=16, 100 candidates)", size,
                        "recall@10 %.3f, %.2f ms/query vs %.1f ms exhaustive (%.0fx)" % (
                            recall, msq, exh, speed),
                        "recall@10 >= 0.95 at >= 20x", recall >= 0.95 and speed >= 20)]
    return [row("two-stage search, IVF1024,Flat default", size, "unparsed",
                "recall@10 >= 0.95 at >= 20x", "n/a")]


def fig_throughput(runner, build, scale, tmp):
    n, q = SCALES[scale]["n"], SCALES[scale]["tp_queries"]
    rows = []
    for kind in ("point", "gaussian", "mog", "codes"):
        label = "throughput and memory, %s" % kind
        size = "%s items D=64, %d queries" % (fmt_n(n), q)
        target = "q/s at recall@10 >= 0.95"
        d = tempfile.mkdtemp(prefix="throughput-", dir=tmp)
        rc, out, err = runner.run([driver(build), "throughput", "--n", str(n), "--dim", "64",
                                   "--queries", str(q), "--kind", kind, "--dir", d])
        shutil.rmtree(d, ignore_errors=True)
        if rc != 0:
            rows.append(row(label, size, "failed: " + last_line(err or out), target, "n/a"))
            continue
        found = None
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 6 and f[0] == kind:
                try:
                    found = [float(x) for x in f[1:6]]
                except ValueError:
                    pass
        if not found:
            rows.append(row(label, size, "unparsed", target, "n/a"))
            continue
        rss, ingest, q1, q2, recall = found
        rows.append(row(label, size,
                        "%s q/s 1 thread, %s q/s 2 threads (%.2fx); recall@10 %.3f; "
                        "RSS %s B/item; ingest %s items/s" % (
                            fmt_n(int(round(q1))), fmt_n(int(round(q2))), q2 / q1 if q1 else 0,
                            recall, fmt_n(int(round(rss))), fmt_n(int(round(ingest)))),
                        target, recall >= 0.95))
    return rows


def fig_paged(runner, build, scale, tmp):
    n, q = SCALES[scale]["n"], SCALES[scale]["paged_queries"]
    size = "%s Gaussians D=64, %d queries" % (fmt_n(n), q)
    label = "larger than memory (page cache limited to half the arena)"
    target = "answers identical to the unlimited run"
    d = tempfile.mkdtemp(prefix="paged-", dir=tmp)
    # One core, as in bench/RESULTS.md, and one OpenMP thread: the mode forks its timed
    # runs after the index is trained, and with an OpenMP team of two threads started
    # before the fork the child crashes (SIGSEGV).
    rc, out, err = runner.run(["taskset", "-c", "1", driver(build), "paged", "--n", str(n),
                               "--dim", "64", "--queries", str(q), "--dir", d],
                              env={"OMP_NUM_THREADS": "1"})
    shutil.rmtree(d, ignore_errors=True)
    if re.search(r"^skipped", out, re.M):
        return [row(label, size, "skipped: " + re.search(r"^skipped:?\s*(.*)", out,
                                                          re.M).group(1), target, "n/a")]
    warm = re.search(r"^no limit.*?" + NUM + r" ms/query", out, re.M)
    lim = re.search(r"^limit .*?" + NUM + r" ms/query \(" + NUM + r"x[^)]*\), answers (\w+)(.*)",
                    out, re.M)
    if not lim:
        check(rc, out, err)
        return [row(label, size, "unparsed", target, "n/a")]
    text = "answers %s; %.2f ms/query limited vs %.2f unlimited (%.1fx)" % (
        lim.group(3), float(lim.group(1)), float(warm.group(1)) if warm else float("nan"),
        float(lim.group(2)))
    faults = re.search(r"major faults ([0-9]+)", lim.group(4))
    peak = re.search(r"peak " + NUM + " MB", lim.group(4))
    if faults:
        text += "; %s major faults" % faults.group(1)
    if peak:
        text += "; memory group peak %s MB" % peak.group(1)
    return [row(label, size, text, target, lim.group(3) == "identical")]


# --- CLI start-up --------------------------------------------------------------

def fig_cli(runner, build, scale, tmp):
    hedgedb = os.path.join(build, "bin", "hedgedb")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli_startup.py")
    runs = SCALES[scale]["cli_runs"]
    # cli_startup.py compares two binaries; both are this build's here.
    rc, out, err = runner.run([sys.executable, script, "--before", hedgedb, "--after", hedgedb,
                               "--runs", str(runs)])
    check(rc, out, err)
    rows = []
    for cmd in ("--help", "list"):
        m = re.search(r"^\| `hedgedb %s` \|([^\n]*)" % re.escape(cmd), out, re.M)
        label = "CLI start-up, `hedgedb %s`" % cmd
        size = "median of %d runs" % runs
        if not m:
            rows.append(row(label, size, "unparsed", "<= 0.05 s", "n/a"))
            continue
        cells = [c.strip() for c in m.group(1).split("|")]
        # before s | after s | before/after | CPU before s | CPU after s | libs before | after
        try:
            wall, cpu, libs = float(cells[1]), float(cells[4]), cells[6]
        except (IndexError, ValueError):
            rows.append(row(label, size, "unparsed: " + m.group(0), "<= 0.05 s", "n/a"))
            continue
        rows.append(row(label, size, "%.3f s wall, %.3f s CPU, %s shared libraries" % (
            wall, cpu, libs), "<= 0.05 s", wall <= 0.05))
    return rows


# --- real embeddings -------------------------------------------------------------

def fig_real(runner, build, scale, tmp):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_embeddings.py")
    out_dir = tempfile.mkdtemp(prefix="real-", dir=tmp)
    rc, out, err = runner.run(["/usr/bin/python3", script, "--build", build, "--out", out_dir],
                              timeout=max(SCALES[scale]["timeout"], 4 * 3600))
    shutil.rmtree(out_dir, ignore_errors=True)
    check(rc, out, err)
    rows, section = [], "?"
    header = []
    for line in out.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("| index"):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
        elif line.startswith("|") and "**" in line:
            cells = [c.strip().replace("*", "") for c in line.strip().strip("|").split("|")]
            try:
                recall = float(cells[3])
                ms_i = header.index("ms/query") if "ms/query" in header else len(cells) - 3
                msq, speed = float(cells[ms_i]), cells[ms_i + 2]
            except (IndexError, ValueError):
                rows.append(row("two-stage search, real embeddings, " + section, "-",
                                "unparsed: " + line, "recall@10 >= 0.95", "n/a"))
                continue
            rows.append(row("two-stage search, real embeddings, %s, %s, %s" % (
                section, cells[0], cells[1]), "-", "recall@10 %.3f, %.2f ms/query (%s vs exhaustive)" % (
                    recall, msq, speed), "recall@10 >= 0.95", recall >= 0.95))
    if not rows:
        rows.append(row("two-stage search, real embeddings", "-", "unparsed", "recall@10 >= 0.95",
                        "n/a"))
    return rows


RUN = {"mc": fig_mc, "dimco-scan": fig_dimco_scan, "dimco-topk": fig_dimco_topk,
       "floors": fig_floors,
       "reopen": fig_reopen, "ingest": fig_ingest, "search": fig_search,
       "throughput": fig_throughput, "paged": fig_paged, "cli": fig_cli, "real": fig_real}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="figures: " + ", ".join(FIGURES))
    ap.add_argument("--build", default="build", help="build tree with bin/ (default: build)")
    ap.add_argument("--scale", choices=sorted(SCALES), default="quick")
    ap.add_argument("--only", default="", help="comma-separated figures to run (see below)")
    ap.add_argument("--log", default="", help="append every command and its raw output here")
    ap.add_argument("--with-real", action="store_true",
                    help="also run bench/real_embeddings.py (trains two models: long)")
    args = ap.parse_args()

    names = [n for n in FIGURES if n != "real" or args.with_real]
    if args.only:
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = [x for x in wanted if x not in FIGURES]
        if unknown:
            ap.error("unknown figure(s) %s; known: %s" % (", ".join(unknown), ", ".join(FIGURES)))
        names = [n for n in FIGURES if n in wanted]
    build = os.path.abspath(args.build)
    runner = Runner(os.path.abspath(args.log) if args.log else "", SCALES[args.scale]["timeout"])

    cpu = machine()
    start = datetime.datetime.utcnow()
    load_start = loadavg()
    runner.log("\n# run_all.py --scale %s, build %s, %s\n" % (
        args.scale, build, start.strftime("%Y-%m-%d %H:%M UTC")))
    rows = []
    tmp = tempfile.mkdtemp(prefix="hedgedb-run-all-", dir="/tmp")
    try:
        for name in names:
            t0 = time.time()
            print("== %s" % name, file=sys.stderr, flush=True)
            try:
                rows.extend(RUN[name](runner, build, args.scale, tmp))
            except Failed as e:
                msg = str(e)
                rows.append(row(name, "-", msg if msg.startswith("unparsed") else
                                "failed: " + msg, "-", "n/a"))
            except Exception as e:  # a parser bug must not stop the other figures
                rows.append(row(name, "-", "unparsed: %s: %s" % (type(e).__name__, e), "-", "n/a"))
            print("   %s: %.0f s" % (name, time.time() - t0), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    end = datetime.datetime.utcnow()

    flags = ", ".join("%s %s" % (f, "yes" if v else "no") for f, v in cpu["flags"].items())
    print("## Performance figures (%s scale)\n" % args.scale)
    print("- CPU: %s (CPU family %s, model %s; %s CPUs; %s)" % (
        cpu["model"], cpu["family"], cpu["model_no"], cpu["cpus"], flags))
    print("- date: %s - %s UTC (%.0f min)" % (start.strftime("%Y-%m-%d %H:%M"),
                                              end.strftime("%H:%M"),
                                              (end - start).total_seconds() / 60))
    print("- load average (1, 5, 15 min): %s at the start, %s at the end" % (load_start, loadavg()))
    print("- build: %s; figures: %s\n" % (args.build, ", ".join(names)))
    print("| path | size | measured | target | verdict |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(c).replace("|", "/") for c in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
