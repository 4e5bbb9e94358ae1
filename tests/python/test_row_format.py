"""Compact rows (create_collection(row_format=...)): float16 and bfloat16.

The stored values are the float32 inputs rounded to nearest even, bit for
bit what np.float16 gives and what an independent bfloat16 reference gives;
get returns them widened exactly; searches (exhaustive and two-stage) score
the rounded rows as NumPy does; everything holds across a reopen (the arena
snapshot) and a reopen from the records. The CLI and Python refuse a bad
format, and float16 refuses values it cannot hold, naming them; so does a
half-float coarse index (SQfp16), of the coarse values it would store.
"""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))


def bf16_reference(x):
    """Nearest bfloat16 of float32 x, ties to even, as float32: the two
    bfloat16 neighbours of x (x's upper 16 bits, and one unit further from
    zero), whichever is nearer in float64; on a tie the one whose last kept
    bit is 0."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    low = (bits & np.uint32(0xFFFF0000)).view(np.float32)
    high = ((bits & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32)
    x64 = np.asarray(x, np.float64)
    d_low = np.abs(x64 - low.astype(np.float64))
    d_high = np.abs(x64 - high.astype(np.float64))
    low_even = ((bits >> np.uint32(16)) & np.uint32(1)) == 0
    pick_low = (d_low < d_high) | ((d_low == d_high) & low_even)
    return np.where(pick_low, low, high).astype(np.float32)


def rounded(x, fmt):
    if fmt == "float16":
        return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)
    return bf16_reference(x)


def tricky_values(fmt, n, rng, positive=False):
    """Values over many binades, exact ties between neighbours of the format,
    and (float16) subnormals: float32, shape (n,)."""
    if fmt == "float16":
        lo, hi = (-24, 15) if positive else (-26, 15)  # variances: subnormals, not 0
    else:
        lo, hi = (-120, 120)
    mag = np.exp2(rng.uniform(lo, hi, size=n)).astype(np.float32)
    # Every third value a tie: the midpoint of two neighbours of the format.
    if fmt == "float16":
        h = mag.astype(np.float16)
        nxt = np.nextafter(h, np.float16(np.inf))
        tie = ((h.astype(np.float64) + nxt.astype(np.float64)) / 2).astype(np.float32)
    else:
        b = bf16_reference(mag).view(np.uint32)
        nxt = (b + np.uint32(0x10000)).view(np.float32)
        tie = ((b.view(np.float32).astype(np.float64) + nxt.astype(np.float64)) / 2).astype(
            np.float32)
    ok = np.isfinite(tie) & (tie <= (65504 if fmt == "float16" else 3.3e38))
    pick = (np.arange(n) % 3 == 0) & ok
    mag = np.where(pick, tie, mag)
    if fmt == "float16":
        mag = np.minimum(mag, np.float32(65504))
    if positive:
        return mag.astype(np.float32)
    return (mag * rng.choice([-1, 1], size=n)).astype(np.float32)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_stored_values_are_the_rounded_inputs_bit_for_bit(tmp_path, fmt):
    rng = np.random.default_rng(7)
    n, d, c = 400, 8, 2
    path = str(tmp_path / "db")
    mean = tricky_values(fmt, n * d, rng).reshape(n, d)
    var = tricky_values(fmt, n * d, rng, positive=True).reshape(n, d)
    vec = tricky_values(fmt, n * d, rng).reshape(n, d)
    mog_mean = tricky_values(fmt, n * c * d, rng).reshape(n, c, d)
    mog_var = tricky_values(fmt, n * c * d, rng, positive=True).reshape(n, c, d)
    weights = rng.uniform(0.1, 1, size=(n, c)).astype(np.float32)
    weights /= weights.sum(axis=1, keepdims=True)
    # The ties really are ties (the test would prove nothing otherwise).
    assert np.sum(rounded(mean, fmt) != mean) > n
    with hedgedb.open(path) as db:
        db.create_collection("g", kind="gaussian", match_b=2.0, dim=d, row_format=fmt, index="Flat")
        db.create_collection("p", kind="point", match_b=2.0, dim=d, row_format=fmt, index="Flat")
        db.create_collection("m", kind="mog", match_b=2.0, dim=d, components=c, row_format=fmt, index="Flat")
        db.ingest("g", mean=mean, var=var)
        db.ingest("p", vec=vec)
        db.ingest("m", mean=mog_mean, var=mog_var, weights=weights)
        assert db.describe("g")["row_format"] == fmt
        assert db.stats("p")["row_format"] == fmt

    def check(db):
        ids = np.arange(n)
        g = db.get("g", ids=ids)
        np.testing.assert_array_equal(np.stack([r["mean"] for r in g]).view(np.uint32),
                                      rounded(mean, fmt).view(np.uint32))
        np.testing.assert_array_equal(np.stack([r["var"] for r in g]).view(np.uint32),
                                      rounded(var, fmt).view(np.uint32))
        p = db.get("p", ids=ids)
        np.testing.assert_array_equal(np.stack([r["vec"] for r in p]).view(np.uint32),
                                      rounded(vec, fmt).view(np.uint32))
        m = db.get("m", ids=ids)
        np.testing.assert_array_equal(np.stack([r["mean"] for r in m]).reshape(n, c, d)
                                      .view(np.uint32), rounded(mog_mean, fmt).view(np.uint32))
        np.testing.assert_array_equal(np.stack([r["var"] for r in m]).reshape(n, c, d)
                                      .view(np.uint32), rounded(mog_var, fmt).view(np.uint32))
        # Mixture weights stay float32 (normalised as a float32 collection does).
        np.testing.assert_allclose(np.stack([r["weights"] for r in m]), weights, rtol=1e-6)

    with hedgedb.open(path) as db:  # the arena snapshot mapped
        assert db.stats("g")["arena_source"] == "snapshot"
        check(db)
    for name in os.listdir(os.path.join(path, "index")):
        if name.endswith(".harena"):
            os.remove(os.path.join(path, "index", name))
    with hedgedb.open(path) as db:  # from the records
        assert db.stats("g")["arena_source"] == "records"
        check(db)


def np_mls(qm, qv, m, v):
    s = qv[:, None, :].astype(np.float64) + v[None].astype(np.float64)
    delta = qm[:, None, :].astype(np.float64) - m[None].astype(np.float64)
    return -0.5 * np.sum(delta ** 2 / s + np.log(s) + np.log(2 * np.pi), axis=2)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_searches_score_the_rounded_rows_as_numpy_does(tmp_path, fmt):
    rng = np.random.default_rng(11)
    n, d, nq = 3000, 16, 20
    centres = rng.normal(size=(30, d)).astype(np.float32) * 3
    mean = (centres[rng.integers(0, 30, n)] + rng.normal(size=(n, d))).astype(np.float32)
    var = rng.uniform(0.05, 0.6, size=(n, d)).astype(np.float32)
    qm = (mean[:nq] + 0.1 * rng.normal(size=(nq, d))).astype(np.float32)
    qv = rng.uniform(0.05, 0.6, size=(nq, d)).astype(np.float32)
    rm, rv = rounded(mean, fmt), rounded(var, fmt)
    l2 = -np.linalg.norm(qm[:, None, :].astype(np.float64) - rm[None].astype(np.float64), axis=2)
    mls = np_mls(qm, qv, rm, rv)
    path = str(tmp_path / "db")
    with hedgedb.open(path) as db:
        db.create_collection("c", kind="gaussian", match_b=2.0, dim=d, row_format=fmt, index="IVF16,Flat")
        # The same rounded rows in a float32 collection: every score equal,
        # bitwise (widening is exact), mc and eta included.
        db.create_collection("f", kind="gaussian", match_b=2.0, dim=d, index="IVF16,Flat")
        db.ingest("c", mean=mean, var=var)
        db.ingest("f", mean=rm, var=rv)
        for exhaustive in (True, False):
            for score, ref in (("l2", l2), ("mls", mls)):
                r = db.search("c", mean=qm, var=qv, k=10, score=score, exhaustive=exhaustive,
                              candidates=200)
                # Scores of the returned items as NumPy computes them on the
                # rounded rows (float32 kernels: relative 1e-5).
                np.testing.assert_allclose(r.scores, np.take_along_axis(ref, r.ids, 1),
                                           rtol=1e-5, atol=1e-5)
                if exhaustive:
                    best = np.sort(ref, axis=1)[:, ::-1][:, :10]
                    np.testing.assert_allclose(r.scores, best, rtol=1e-5, atol=1e-5)
            for score in ("mc", "mls", "csd", "l2"):
                a = db.search("c", mean=qm, var=qv, k=10, score=score, exhaustive=exhaustive)
                b = db.search("f", mean=qm, var=qv, k=10, score=score, exhaustive=exhaustive)
                np.testing.assert_array_equal(a.ids, b.ids)
                np.testing.assert_array_equal(a.scores, b.scores)
                np.testing.assert_array_equal(a.uncertainties, b.uncertainties)
        # Upsert and delete: the replaced rows score as their new values.
        db.ingest("c", upsert=True, ids=np.arange(5), mean=mean[100:105], var=var[100:105])
        db.ingest("f", upsert=True, ids=np.arange(5), mean=rm[100:105], var=rv[100:105])
        db.remove("c", ids=[7, 8])
        db.remove("f", ids=[7, 8])
        before = db.search("c", mean=qm, var=qv, k=10, exhaustive=True)
        same = db.search("f", mean=qm, var=qv, k=10, exhaustive=True)
        np.testing.assert_array_equal(before.ids, same.ids)
        np.testing.assert_array_equal(before.scores, same.scores)
        assert not np.isin([7, 8], before.ids).any()
    with hedgedb.open(path) as db:
        after = db.search("c", mean=qm, var=qv, k=10, exhaustive=True)
        np.testing.assert_array_equal(after.ids, before.ids)
        np.testing.assert_array_equal(after.scores, before.scores)


def test_float16_refuses_what_it_cannot_hold_and_bfloat16_takes_it(tmp_path):
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("h", kind="gaussian", match_b=2.0, dim=2, row_format="float16", index="Flat")
        db.create_collection("b", kind="gaussian", match_b=2.0, dim=2, row_format="bfloat16", index="Flat")
        ok_mean = np.zeros((2, 2), np.float32)
        ok_var = np.ones((2, 2), np.float32)
        db.ingest("h", mean=ok_mean, var=ok_var)
        big = ok_mean.copy()
        big[1, 0] = 70000.0
        with pytest.raises(hedgedb.InvalidArgumentError,
                           match=r"mean 70000 of item 1 \(element 0\).*float16.*65504"):
            db.ingest("h", mean=big, var=ok_var)
        zero = ok_var.copy()
        zero[0, 1] = 2e-8  # below half of float16's smallest subnormal 2^-24: would be 0
        with pytest.raises(hedgedb.InvalidArgumentError,
                           match=r"variance 2e-08 of item 0 \(element 1\) rounds to 0 .*float16"):
            db.ingest("h", mean=ok_mean, var=zero)
        assert db.stats("h")["items"] == 2  # nothing of the refused batches stored
        # A subnormal variance is taken, rounded as NumPy rounds it.
        tiny = ok_var.copy()
        tiny[0, 1] = 1e-6
        db.ingest("h", ids=[7, 8], mean=ok_mean, var=tiny)
        got = db.get("h", ids=[7])[0]["var"]
        assert got[1] == np.float32(np.float16(1e-6)) and got[1] != np.float32(1e-6)
        db.ingest("b", mean=big, var=tiny)
        got = db.get("b", ids=[1])[0]
        assert got["mean"][0] == 70144.0  # bfloat16: 8 significant bits
        with pytest.raises(hedgedb.InvalidArgumentError, match="bfloat16"):
            db.ingest("b", mean=np.full((1, 2), 3.4e38, np.float32), var=ok_var[:1])
        with pytest.raises(hedgedb.InvalidArgumentError, match="unknown row_format 'half'"):
            db.create_collection("x", kind="gaussian", match_b=2.0, dim=2, row_format="half")
        with pytest.raises(hedgedb.InvalidArgumentError, match="codes are stored as bytes"):
            db.create_collection("x", kind="codes", dim=2, code_k=4, row_format="float16")
        assert "x" not in db.list_collections()


@pytest.mark.parametrize("index,limit", [("SQfp16", 65504.0), ("IVF4,SQfp16", 32736.0)])
def test_half_float_indexes_refuse_coarse_values_they_cannot_hold(tmp_path, index, limit):
    """An SQfp16 index would store a coarse value beyond a half's range as an
    infinity: ingest and upsert raise, naming the item id, the coarse
    dimension and the value, and nothing is stored. Under an IVF the bound is
    32736 (its lists store residuals). Values up to the bound are taken and
    found."""
    rng = np.random.default_rng(3)
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("c", kind="gaussian", match_b=2.0, dim=4, index=index)
        mean = rng.standard_normal((1200, 4)).astype(np.float32)
        var = np.full((1200, 4), 0.1, np.float32)
        db.ingest("c", ids=np.arange(1200), mean=mean, var=var)  # trains at the next search
        db.search("c", mean=mean[:1], var=var[:1], k=1)
        assert db.stats("c")["index_trained"]
        for big in (70000.0, -70000.0):
            far = mean[:3].copy()
            far[1, 2] = big
            with pytest.raises(hedgedb.InvalidArgumentError,
                               match=rf"mean {big:g} of item id 5001 \(coarse dimension 2\) "
                                     rf"is outside what index '{index}' holds"):
                db.ingest("c", ids=[5000, 5001, 5002], mean=far, var=var[:3])
            with pytest.raises(hedgedb.InvalidArgumentError, match=r"of item id 1 \(coarse"):
                db.ingest("c", upsert=True, ids=[0, 1], mean=far[:2], var=var[:2])
        assert db.stats("c")["items"] == 1200
        got = db.get("c", ids=[1, 5001])
        np.testing.assert_array_equal(got[0]["mean"], mean[1])
        assert not got[1]["found"]
        # At the bound: stored, indexed (not stale) and found by a two-stage search.
        edge = rng.standard_normal((2, 4)).astype(np.float32)
        edge[0, 0] = limit
        edge[1, 3] = -limit
        db.ingest("c", ids=[6000, 6001], mean=edge, var=var[:2])
        st = db.stats("c")
        assert st["items"] == 1202 and st["index_vectors"] == 1202 and not st["index_stale"]
        r = db.search("c", mean=edge, var=var[:2], k=1, score="mls")
        assert r.ids[:, 0].tolist() == [6000, 6001]


def test_cli_create_row_format(tmp_path):
    path = str(tmp_path / "db")
    out = subprocess.run([HEDGEDB, "create", "--db", path, "--collection", "c", "--kind",
                          "gaussian", "--dim", "4", "--row-format", "bfloat16"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["created"]["row_format"] == "bfloat16"
    stats = subprocess.run([HEDGEDB, "stats", "--db", path, "--collection", "c"],
                           capture_output=True, text=True, check=True)
    assert json.loads(stats.stdout)["row_format"] == "bfloat16"
    bad = subprocess.run([HEDGEDB, "create", "--db", path, "--collection", "d", "--kind",
                          "gaussian", "--dim", "4", "--row-format", "half"],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert "--row-format" in bad.stderr and "half" in bad.stderr
    codes = subprocess.run([HEDGEDB, "create", "--db", path, "--collection", "d", "--kind",
                            "codes", "--dim", "4", "--code-k", "4", "--row-format", "float16"],
                           capture_output=True, text=True)
    assert codes.returncode == 2, codes.stderr
    assert "codes are stored as bytes" in codes.stderr
    # A float32 collection says so, and its stored descriptor has no field
    # (older databases read as float32).
    subprocess.run([HEDGEDB, "create", "--db", path, "--collection", "f", "--kind", "point",
                    "--dim", "4"], capture_output=True, text=True, check=True)
    stats = subprocess.run([HEDGEDB, "stats", "--db", path, "--collection", "f"],
                           capture_output=True, text=True, check=True)
    assert json.loads(stats.stdout)["row_format"] == "float32"


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_calibrate_reads_the_rounded_rows(tmp_path, fmt):
    """calibrate (its items as queries, the match parameters fitted to them)
    on a compact collection gives what it gives on a float32 collection of
    the rounded values."""
    rng = np.random.default_rng(5)
    n, d = 400, 6
    labels = rng.integers(0, 8, n)
    centres = rng.normal(size=(8, d)).astype(np.float32) * 2
    mean = (centres[labels] + 0.5 * rng.normal(size=(n, d))).astype(np.float32)
    var = rng.uniform(0.05, 0.3, size=(n, d)).astype(np.float32)
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("c", kind="gaussian", dim=d, row_format=fmt, index="Flat")
        db.create_collection("f", kind="gaussian", dim=d, index="Flat")
        db.ingest("c", mean=mean, var=var, labels=labels)
        db.ingest("f", mean=rounded(mean, fmt), var=rounded(var, fmt), labels=labels)
        a = db.calibrate("c", max_pairs=40000)
        b = db.calibrate("f", max_pairs=40000)
    assert a["match_parameters_fitted"] and b["match_parameters_fitted"]
    assert a["match_a"] == b["match_a"] and a["match_b"] == b["match_b"]
    assert a["pairs"] == b["pairs"]
    assert a["after"]["ece"] == b["after"]["ece"]
