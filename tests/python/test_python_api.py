"""`import hedgedb`: the Python binding of the public C++ API.

Round trips of every kind, errors with the engine's message, zero-copy for
C-contiguous float32, the GIL released during a search, and results equal to
the CLI's on the same database and to a NumPy reference of the scores.
"""

import json
import os
import pathlib
import subprocess
import threading
import time

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))


def gaussians(n, d, seed=0):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=(n, d)).astype(np.float32)
    var = rng.uniform(0.05, 0.5, size=(n, d)).astype(np.float32)
    return mean, var


@pytest.fixture
def db(tmp_path):
    with hedgedb.open(str(tmp_path / "db")) as handle:
        yield handle


@pytest.mark.parametrize("kind", ["point", "gaussian", "mog", "codes"])
def test_round_trip_every_kind(db, kind):
    n, d, c, k = 50, 6, 2, 16
    rng = np.random.default_rng(1)
    spec = dict(kind=kind, dim=d, index="Flat" if kind != "codes" else "")
    arrays = {}
    if kind == "point":
        arrays["vec"] = rng.normal(size=(n, d)).astype(np.float32)
    elif kind == "gaussian":
        arrays["mean"], arrays["var"] = gaussians(n, d)
    elif kind == "mog":
        spec["components"] = c
        arrays["mean"] = rng.normal(size=(n, c, d)).astype(np.float32)
        arrays["var"] = rng.uniform(0.1, 0.4, size=(n, c, d)).astype(np.float32)
        arrays["weights"] = np.full((n, c), 0.5, np.float32)
    else:
        spec["code_k"] = k
        arrays["codes"] = rng.integers(0, k, size=(n, d)).astype(np.int32)
    db.create_collection("c", **spec)
    assert db.list_collections() == ["c"]
    assert db.describe("c")["kind"] == kind
    labels = np.arange(n, dtype=np.int64) % 5
    ids = db.ingest("c", ids=np.arange(100, 100 + n), labels=labels,
                    payloads=[f"item {i}" for i in range(n)], **arrays)
    assert ids.tolist() == list(range(100, 100 + n))
    got = db.get("c", [100, 149, 7])
    assert got[2] == {"id": 7, "found": False}
    assert got[0]["label"] == 0 and got[0]["payload"] == b"item 0"
    for name, value in arrays.items():
        np.testing.assert_array_equal(got[1][name], value[49].ravel())
    if kind == "codes":
        queries = {"logp": np.log(np.full((3, d, k), 1.0 / k, np.float32))}
    else:
        queries = {name: value[:3] for name, value in arrays.items()}
    res = db.search("c", k=4, exhaustive=True, with_payload=True, **queries)
    assert res.ids.shape == res.scores.shape == res.probs.shape == (3, 4)
    assert res.uncertainties.shape == (3, 4) and res.query_uncertainty.shape == (3,)
    assert len(res.payloads) == 3 and all(len(p) == 4 for p in res.payloads)
    assert set(res.ids.ravel()) <= set(range(100, 150))
    assert np.all(np.diff(res.scores, axis=1) <= 0)  # best first
    if kind in ("gaussian", "mog"):
        assert np.all(np.isfinite(res.query_uncertainty))
    else:
        assert np.all(np.isnan(res.query_uncertainty))
    stats = db.stats("c")
    assert stats["items"] == n
    # Created in this session: its rows were read from the (empty) records.
    assert stats["arena_source"] == "records" and stats["arena_mapped_bytes"] == 0
    assert db.remove("c", [100, 101]) == 2
    assert db.list_ids("c").tolist() == list(range(102, 150))
    db.drop_collection("c")
    assert db.list_collections() == []


def test_errors_carry_the_engines_message(db, tmp_path):
    db.create_collection("g", kind="gaussian", dim=4)
    mean, var = gaussians(10, 4)
    with pytest.raises(hedgedb.NotFoundError, match="no collection named 'nope'") as e:
        db.search("nope", mean=mean, var=var)
    assert isinstance(e.value, KeyError) and isinstance(e.value, hedgedb.Error)
    assert str(e.value) == "no collection named 'nope'"
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"mean: expected shape \(n, 4\)"):
        db.ingest("g", mean=mean[:, :3], var=var)
    with pytest.raises(ValueError, match=r"var: expected shape \(10, 4\)"):
        db.ingest("g", mean=mean, var=var[:5])
    bad = var.copy()
    bad[3, 1] = np.nan
    with pytest.raises(hedgedb.InvalidArgumentError, match="variance of item 3"):
        db.ingest("g", mean=mean, var=bad)
    with pytest.raises(hedgedb.InvalidArgumentError, match="vec does not apply"):
        db.ingest("g", vec=mean)
    with pytest.raises(hedgedb.InvalidArgumentError, match="needs var"):
        db.ingest("g", mean=mean)
    with pytest.raises(hedgedb.InvalidArgumentError, match="expected a numeric array"):
        db.ingest("g", mean=[["a"] * 4], var=var[:1])
    with pytest.raises(hedgedb.InvalidArgumentError, match="payloads: expected 10 items"):
        db.ingest("g", mean=mean, var=var, payloads=["x"])
    with pytest.raises(hedgedb.InvalidArgumentError, match="unknown kind"):
        db.create_collection("x", kind="ellipse", dim=4)
    with pytest.raises(hedgedb.Error, match="id 12345 is not in collection .g. .nothing removed."):
        db.remove("g", [12345])
    # Nothing of the refused batches was written.
    assert db.stats("g")["items"] == 0
    db.close()
    with pytest.raises(hedgedb.Error, match="is closed"):
        db.list_collections()
    with pytest.raises(hedgedb.NotFoundError):
        hedgedb.open(str(tmp_path / "absent"), create_if_missing=False)


def test_contiguous_float32_is_not_copied(db):
    db.create_collection("g", kind="gaussian", dim=8, index="Flat")
    mean, var = gaussians(64, 8)
    before = hedgedb._conversions()
    db.ingest("g", mean=mean, var=var, labels=np.zeros(64, np.int64))
    db.search("g", mean=mean[:4], var=var[:4], k=3)
    assert hedgedb._conversions() == before  # used where they lie
    db.ingest("g", mean=mean.astype(np.float64), var=var)  # float64: converted once
    assert hedgedb._conversions() == before + 1
    wide = np.zeros((64, 16), np.float32)
    wide[:, ::2] = mean
    db.ingest("g", mean=wide[:, ::2], var=var)  # a strided view: converted once
    assert hedgedb._conversions() == before + 2
    np.testing.assert_array_equal(db.get("g", [128])[0]["mean"], mean[0])


def test_search_releases_the_gil(db):
    db.create_collection("g", kind="gaussian", dim=32, index="Flat")
    mean, var = gaussians(20000, 32)
    db.ingest("g", mean=mean, var=var)
    done = []

    def search():
        db.search("g", mean=mean[:300], var=var[:300], k=10, exhaustive=True)
        done.append(time.monotonic())

    thread = threading.Thread(target=search)
    start = time.monotonic()
    thread.start()
    spins = 0
    while thread.is_alive():
        spins += 1  # runs only while the search does not hold the GIL
    thread.join()
    assert done and done[0] - start > 0.05
    assert spins > 10000, spins


def test_results_equal_the_cli_and_a_numpy_reference(tmp_path):
    path = str(tmp_path / "db")
    rng = np.random.default_rng(3)
    vec = rng.normal(size=(300, 5)).astype(np.float32)
    mean, var = gaussians(300, 5, seed=4)
    with hedgedb.open(path) as db:
        db.create_collection("p", kind="point", dim=5, index="Flat", match_a=2.0, match_b=1.0)
        db.create_collection("g", kind="gaussian", dim=5, index="Flat")
        db.ingest("p", vec=vec)
        db.ingest("g", mean=mean, var=var)
        point = db.search("p", vec=vec[:4], k=5)
        mls = db.search("g", mean=mean[:4], var=var[:4], k=5, score="mls", exhaustive=True)
        mc = db.search("g", mean=mean[:4], var=var[:4], k=5, exhaustive=True)
    # NumPy: match = sigmoid(-a ||x - y|| + b); mls = log N(mu1 - mu2; 0, s1 + s2).
    dist = np.linalg.norm(vec[:4, None, :].astype(np.float64) - vec[None], axis=2)
    match = 1.0 / (1.0 + np.exp(2.0 * dist - 1.0))
    order = np.argsort(-match, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(point.ids, order)
    np.testing.assert_allclose(point.scores, np.take_along_axis(match, order, 1), rtol=1e-5)
    s = var[:4, None, :].astype(np.float64) + var[None]
    delta = mean[:4, None, :].astype(np.float64) - mean[None]
    ref = -0.5 * np.sum(delta ** 2 / s + np.log(s) + np.log(2 * np.pi), axis=2)
    np.testing.assert_allclose(mls.scores, np.take_along_axis(ref, mls.ids, 1), rtol=1e-5)
    np.testing.assert_array_equal(mls.ids, np.argsort(-ref, axis=1)[:, :5])
    # The CLI on the same database: the same ids and scores (mc included:
    # the collection's seeded sample bank).
    np.save(tmp_path / "m.npy", mean[:4])
    np.save(tmp_path / "v.npy", var[:4])
    out = subprocess.run([HEDGEDB, "search", "--db", path, "--collection", "g", "--mean",
                          str(tmp_path / "m.npy"), "--var", str(tmp_path / "v.npy"), "--k", "5",
                          "--exhaustive"], capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(lines) == 4
    for q, line in enumerate(lines):
        assert [h["id"] for h in line["results"]] == mc.ids[q].tolist()
        np.testing.assert_allclose([h["score"] for h in line["results"]], mc.scores[q],
                                   rtol=1e-6)


def test_variance_forms_are_converted_once(db):
    db.create_collection("g", kind="gaussian", dim=4, index="Flat")
    mean, var = gaussians(6, 4)
    forms = {"std": np.sqrt(var), "log_var": np.log(var), "log_std": 0.5 * np.log(var)}
    for i, (name, values) in enumerate(forms.items()):
        db.ingest("g", mean=mean, ids=np.arange(6) + 10 * i, **{name: values.astype(np.float32)})
        for record, row in zip(db.get("g", np.arange(6) + 10 * i), var):
            np.testing.assert_allclose(record["var"], row, rtol=1e-5)
    by_var = db.search("g", mean=mean[:2], var=var[:2], k=3, exhaustive=True)
    by_std = db.search("g", mean=mean[:2], std=np.sqrt(var[:2]), k=3, exhaustive=True)
    np.testing.assert_array_equal(by_var.ids, by_std.ids)
    bad = np.sqrt(var)
    bad[1, 2] = -1
    with pytest.raises(hedgedb.InvalidArgumentError, match="std of item 1"):
        db.ingest("g", mean=mean, std=bad)
    with pytest.raises(hedgedb.InvalidArgumentError, match="give the variances once"):
        db.ingest("g", mean=mean, var=var, std=np.sqrt(var))
    assert db.stats("g")["items"] == 18


def test_filters_and_upsert(db):
    """labels_in / labels_not_in / payload_equals filter the search (the hits
    pass, and equal a NumPy-side selection when fewer than k pass); upsert
    replaces existing ids in one batch."""
    n, d = 600, 8
    mean, var = gaussians(n, d, seed=3)
    labels = np.arange(n, dtype=np.int64) % 6
    payloads = [json.dumps({"camera": "north" if i % 2 else "south", "n": i}) for i in range(n)]
    db.create_collection("f", "gaussian", d)
    db.ingest("f", mean=mean, var=var, labels=labels, payloads=payloads,
              ids=np.arange(n, dtype=np.int64))
    q_mean, q_var = gaussians(2, d, seed=4)

    r = db.search("f", mean=q_mean, var=q_var, k=10, labels_in=np.array([2, 5]))
    assert (r.passing == 200).all()
    assert set(r.labels.ravel()) <= {2, 5}
    r = db.search("f", mean=q_mean, var=q_var, k=10, labels_not_in=[0, 1, 2, 3, 4])
    assert set(r.labels.ravel()) == {5}
    r = db.search("f", mean=q_mean, var=q_var, k=10, payload_equals={"camera": "north", "n": 7})
    assert r.passing.tolist() == [1, 1]
    assert r.ids[:, 0].tolist() == [7, 7] and (r.ids[:, 1:] == -1).all()
    r = db.search("f", mean=q_mean, var=q_var, k=400, labels_in=[1],
                  payload_equals={"camera": "north"})
    expected = {i for i in range(n) if i % 6 == 1 and i % 2 == 1}
    assert r.passing[0] == len(expected)
    assert set(r.ids[0][r.ids[0] >= 0].tolist()) == expected
    r = db.search("f", mean=q_mean, var=q_var, k=3)
    assert (r.passing == -1).all()
    with pytest.raises(ValueError, match="not both"):
        db.search("f", mean=q_mean, var=q_var, labels_in=[1], labels_not_in=[2])
    with pytest.raises(ValueError, match="payload_equals"):
        db.search("f", mean=q_mean, var=q_var, payload_equals={"camera": ["north"]})

    # Upsert: ids 0..9 replaced (label 9, new means), 600..601 added.
    new_mean, new_var = gaussians(12, d, seed=5)
    ids = np.concatenate([np.arange(10), [600, 601]]).astype(np.int64)
    with pytest.raises(hedgedb.Error, match="already exists"):
        db.ingest("f", mean=new_mean, var=new_var, ids=ids)
    db.ingest("f", mean=new_mean, var=new_var, ids=ids, labels=np.full(12, 9), upsert=True)
    assert db.stats("f")["items"] == 602
    got = db.get("f", np.array([0, 601, 10]))
    assert got[0]["label"] == 9 and np.array_equal(got[0]["mean"], new_mean[0])
    assert got[0]["payload"] in (b"", "")  # replaced without a payload
    assert got[1]["label"] == 9
    assert got[2]["label"] == 10 % 6
    with pytest.raises(ValueError, match="upsert needs the ids"):
        db.ingest("f", mean=new_mean, var=new_var, upsert=True)
