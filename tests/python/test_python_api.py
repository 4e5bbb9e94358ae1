"""`import hedgedb`: the Python binding of the public C++ API.

Round trips of every kind, errors with the engine's message, zero-copy for
C-contiguous float32, the GIL released during a search, and results equal to
the CLI's on the same database and to a NumPy reference of the scores.
"""

import json
import os
import pathlib
import subprocess
import sys
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
    # At the prompt: the shape and each query's best hit.
    assert len(res) == 3
    text = repr(res)
    assert text.startswith("SearchResults(3 queries x 4 results")
    assert f"query 0: best id {res.ids[0, 0]} score" in text and "query 2:" in text
    if kind in ("gaussian", "mog", "codes"):  # codes: the query table's entropy
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
    with pytest.raises(hedgedb.InvalidArgumentError,
                       match=r"var \(or std, log_var, log_std\) is missing for the gaussian "
                             r"collection 'g' \(gaussian items take mean and var\)"):
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


def cli(*args):
    """Runs bin/hedgedb; returns (exit code, stderr)."""
    r = subprocess.run([HEDGEDB, *args], capture_output=True, text=True)
    return r.returncode, r.stderr


def test_integer_arguments_are_exact_or_refused(db, tmp_path):
    """ids, labels, codes, get/remove ids and label filters take integers by
    the command line's rule for .npy files: any integer dtype whose values
    fit, and floats only when every value is an integer. Nothing is
    truncated, wrapped or cast: a refused batch writes nothing."""
    db.create_collection("p", kind="point", dim=2, index="Flat")
    vec = np.zeros((2, 2), np.float32)
    refused = [
        (dict(ids=[0.5, 1.7]), r"ids: element 0 \(0.5\) is not an integer"),
        (dict(ids=np.array([2**63, 1], dtype=np.uint64)), r"ids: element 0 .* does not fit"),
        (dict(ids=[np.nan, 1.0]), r"ids: element 0 \(nan\) is not an integer"),
        (dict(ids=[1e19, 1.0]), r"ids: element 0 .* is not an integer in int64's range"),
        (dict(ids=[True, False]), r"ids: expected an integer array, got dtype bool"),
        (dict(ids=["a", "b"]), r"ids: expected an integer array"),
        (dict(labels=[2.9, -0.5]), r"labels: element 0 \(2.9\)"),
        (dict(labels=np.array([1, 2**64 - 1], dtype=np.uint64)), r"labels: element 1"),
    ]
    for kwargs, message in refused:
        with pytest.raises(hedgedb.InvalidArgumentError, match=message):
            db.ingest("p", vec=vec, **kwargs)
    assert db.stats("p")["items"] == 0
    # Integer dtypes of any width, and floats holding integers, are exact.
    db.ingest("p", vec=vec, ids=np.array([3, 4], dtype=np.int8),
              labels=np.array([7, 2**40], dtype=np.uint64))
    db.ingest("p", vec=vec, ids=[5.0, 6.0], labels=np.array([-1.0, 8.0], dtype=np.float32))
    got = db.get("p", np.array([3, 4, 5, 6], dtype=np.uint16))
    assert [g["label"] for g in got] == [7, 2**40, -1, 8]
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"ids: element 0 \(1.9\)"):
        db.get("p", [1.9])
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"ids: element 1 \(3.5\)"):
        db.remove("p", [3, 3.5])
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"labels_in: element 0 \(7.5\)"):
        db.search("p", vec=vec, labels_in=[7.5])
    assert db.stats("p")["items"] == 4
    # Codes: int32 after the same rule; nothing wraps (2**32 + 1 is not 1).
    db.create_collection("c", kind="codes", dim=3, code_k=4)
    for codes, message in [(np.array([[2**32 + 1, 0, 0]], dtype=np.int64), "does not fit in int32"),
                           (np.array([[1.5, 0, 0]]), r"codes: element 0 \(1.5\) is not an integer"),
                           (np.array([[-2**31 - 1, 0, 0]]), "does not fit in int32")]:
        with pytest.raises(hedgedb.InvalidArgumentError, match=message):
            db.ingest("c", codes=codes)
    db.ingest("c", codes=np.array([[1.0, 2.0, 3.0]]), ids=[0])
    assert db.get("c", [0])[0]["codes"].tolist() == [1, 2, 3]
    # The command line refuses the same float ids file with the same words.
    np.save(tmp_path / "v.npy", vec)
    np.save(tmp_path / "ids.npy", np.array([0.5, 1.7]))
    path = str(tmp_path / "cli_db")
    with hedgedb.open(path) as other:
        other.create_collection("p", kind="point", dim=2)
    code, err = cli("ingest", "--db", path, "--collection", "p", "--vec", str(tmp_path / "v.npy"),
                    "--ids", str(tmp_path / "ids.npy"))
    assert code != 0 and "element 0 (0.5) is not an integer" in err, err


def test_labels_may_be_missing_per_item(db):
    """labels=[3, None, 5]: the None item has no label, the others keep
    theirs (one batch)."""
    db.create_collection("p", kind="point", dim=2, index="Flat")
    vec = np.arange(6, dtype=np.float32).reshape(3, 2)
    db.ingest("p", vec=vec, ids=[0, 1, 2], labels=[3, None, 5])
    db.ingest("p", vec=vec, ids=[3, 4, 5], labels=np.array([None, 8, None], dtype=object))
    assert [g["label"] for g in db.get("p", np.arange(6))] == [3, None, 5, None, 8, None]
    r = db.search("p", vec=vec[:1], k=6, labels_not_in=[3], exhaustive=True)
    assert sorted(r.ids[0][r.ids[0] >= 0].tolist()) == [1, 2, 3, 4, 5]
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"labels: element 1 \(0.5\)"):
        db.ingest("p", vec=vec, ids=[6, 7, 8], labels=[None, 0.5, 1])


def test_scalar_arguments_are_checked(db):
    db.create_collection("g", kind="gaussian", dim=2, index="Flat")
    mean, var = gaussians(4, 2)
    db.ingest("g", mean=mean, var=var)
    for seed, message in [(-1, r"seed must be in \[0, 2\*\*64\), got -1"),
                          (2**64, r"seed must be in \[0, 2\*\*64\)"),
                          (1.5, r"seed: expected an integer")]:
        with pytest.raises(hedgedb.InvalidArgumentError, match=message):
            db.search("g", mean=mean, var=var, seed=seed)
        with pytest.raises(hedgedb.InvalidArgumentError, match=message):
            db.create_collection("x", kind="gaussian", dim=2, seed=seed)
    with pytest.raises(hedgedb.InvalidArgumentError, match="samples must be >= 0"):
        db.create_collection("x", kind="gaussian", dim=2, samples=-1)
    with pytest.raises(hedgedb.InvalidArgumentError, match="samples must be >= 0"):
        db.search("g", mean=mean, var=var, samples=-1)
    with pytest.raises(hedgedb.InvalidArgumentError, match="k: expected an integer"):
        db.search("g", mean=mean, var=var, k=2.5)
    with pytest.raises(hedgedb.InvalidArgumentError, match="k must be in"):
        db.search("g", mean=mean, var=var, k=10**10)
    assert db.list_collections() == ["g"]
    assert db.search("g", mean=mean, var=var, seed=np.uint64(2**64 - 1), k=2).ids.shape == (4, 2)


def test_float64_values_that_float32_cannot_hold_are_refused(db, tmp_path):
    """A variance of 1e-50 given as float64 would be 0 in float32: refused
    with its real value, as the command line refuses it; a subnormal float32
    variance is > 0 and accepted."""
    db.create_collection("g", kind="gaussian", dim=2, index="Flat")
    mean = np.zeros((1, 2))
    var = np.array([[0.5, 1e-50]])
    message = r"var: element 1 \(1e-50\) is outside float32's range"
    with pytest.raises(hedgedb.InvalidArgumentError, match=message):
        db.ingest("g", mean=mean, var=var)
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"mean: element 0 \(1e\+39\)"):
        db.ingest("g", mean=np.array([[1e39, 0.0]]), var=np.ones((1, 2)))
    zero = r"variance of item 0 must be > 0, got 0$"  # %g, not 0.000000
    with pytest.raises(hedgedb.InvalidArgumentError, match=zero):
        db.ingest("g", mean=mean, var=np.array([[0.5, 0.0]], np.float32))
    db.ingest("g", mean=mean, var=np.array([[0.5, 1e-40]], np.float32))  # subnormal, > 0
    assert db.stats("g")["items"] == 1
    path = str(tmp_path / "cli_db")
    with hedgedb.open(path) as other:
        other.create_collection("g", kind="gaussian", dim=2)
    np.save(tmp_path / "m.npy", mean)
    np.save(tmp_path / "v.npy", var)
    code, err = cli("ingest", "--db", path, "--collection", "g", "--mean",
                    str(tmp_path / "m.npy"), "--var", str(tmp_path / "v.npy"))
    assert code != 0 and "(1e-50) is outside float32's range" in err, err


def test_an_empty_batch_writes_nothing_as_on_the_command_line(db, tmp_path):
    db.create_collection("g", kind="gaussian", dim=3, index="Flat")
    before = db.stats("g")["sequence"]
    written = db.ingest("g", mean=np.zeros((0, 3), np.float32), var=np.zeros((0, 3), np.float32),
                        ids=np.zeros(0, np.int64), labels=[], payloads=[])
    assert written.dtype == np.int64 and written.shape == (0,)
    assert db.stats("g")["items"] == 0 and db.stats("g")["sequence"] == before
    # Shapes are still checked.
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"ids: expected shape \(0,\)"):
        db.ingest("g", mean=np.zeros((0, 3)), var=np.zeros((0, 3)), ids=[1])
    path = str(tmp_path / "cli_db")
    with hedgedb.open(path) as other:
        other.create_collection("g", kind="gaussian", dim=3)
    np.save(tmp_path / "m.npy", np.zeros((0, 3), np.float32))
    code, err = cli("ingest", "--db", path, "--collection", "g", "--mean",
                    str(tmp_path / "m.npy"), "--var", str(tmp_path / "m.npy"))
    assert code == 0, err


def test_result_arrays_have_at_most_as_many_columns_as_items(db):
    """k is a bound, not a size: k = 10**7 or 2*10**9 on 20 items gives 20
    columns (no gigabytes of padding); with fewer passing items than k the
    rows still pad to min(k, items)."""
    db.create_collection("g", kind="gaussian", dim=4, index="HNSW16")
    mean, var = gaussians(20, 4)
    db.ingest("g", mean=mean, var=var, labels=np.arange(20) % 2)
    for k in (10**7, 2 * 10**9):
        r = db.search("g", mean=mean[:3], var=var[:3], k=k)
        assert r.ids.shape == (3, 20) and r.scores.shape == (3, 20)
    r = db.search("g", mean=mean[:3], var=var[:3], k=10**7, labels_in=[1])
    assert r.ids.shape == (3, 20) and (r.ids[:, 10:] == -1).all() and (r.ids[:, :10] >= 0).all()
    assert db.search("g", mean=mean[:3], var=var[:3], k=5).ids.shape == (3, 5)
    with pytest.raises(hedgedb.InvalidArgumentError, match="ef-search must be at most 16384"):
        db.search("g", mean=mean[:1], var=var[:1], ef_search=2_000_000_000)
    assert db.search("g", mean=mean[:1], var=var[:1], k=3, ef_search=16384).ids.shape == (1, 3)


# Every call on a closed DB raises, after close() and after a with block;
# close() on one thread while others search and get waits for them.
CLOSED = r"""
import sys, threading
import numpy as np
import hedgedb

path = sys.argv[1]
db = hedgedb.open(path)
db.create_collection("g", kind="gaussian", dim=8, index="Flat")
rng = np.random.default_rng(0)
mean = rng.normal(size=(3000, 8)).astype(np.float32)
var = np.full((3000, 8), 0.1, np.float32)
db.ingest("g", mean=mean, var=var)
db.close()
db.close()  # twice: nothing to do
with hedgedb.open(path) as other:
    pass
calls = {
    "get": lambda d: d.get("g", [0]), "remove": lambda d: d.remove("g", [0]),
    "flush": lambda d: d.flush(), "catch_up": lambda d: d.catch_up(),
    "search": lambda d: d.search("g", mean=mean[:1], var=var[:1]),
    "ingest": lambda d: d.ingest("g", mean=mean[:1], var=var[:1]),
    "stats": lambda d: d.stats("g"), "list_ids": lambda d: d.list_ids("g"),
    "describe": lambda d: d.describe("g"), "list_collections": lambda d: d.list_collections(),
}
for handle in (db, other):
    for name, call in calls.items():
        try:
            call(handle)
            sys.exit(name + " did not raise")
        except hedgedb.Error as e:
            assert "is closed" in str(e), (name, str(e))
for rounds in range(int(sys.argv[2])):
    db = hedgedb.open(path)
    outcomes = []
    def work(kind):
        try:
            for _ in range(50):
                if kind == 0:
                    r = db.search("g", mean=mean[:20], var=var[:20], k=10, exhaustive=True)
                    assert r.ids.shape == (20, 10)
                else:
                    assert len(db.get("g", np.arange(3000))) == 3000
            outcomes.append("done")
        except hedgedb.Error as e:
            assert "is closed" in str(e), str(e)
            outcomes.append("closed")
    threads = [threading.Thread(target=work, args=(i % 2,)) for i in range(4)]
    for t in threads:
        t.start()
    db.close()
    for t in threads:
        t.join()
    assert len(outcomes) == 4, outcomes
    hedgedb.open(path).close()  # the lock was released by close()
print("ok")
"""


def test_closed_database_raises_and_close_waits_for_calls(tmp_path):
    # A child process: a crash there fails this test instead of the run.
    r = subprocess.run([sys.executable, "-c", CLOSED, str(tmp_path / "db"), "10"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)


def test_index_upkeep_retrains_a_drifted_collection_and_stats_say_so(tmp_path):
    # Lists trained on 30 clusters, then every item replaced by items of 30
    # other clusters in the same region (docs/concepts.md, Coarse indexes,
    # "Upkeep"; tests/engine/churn_test.cc is the C++ side).
    rng = np.random.default_rng(0)
    d, n = 16, 12000
    before, after = rng.normal(size=(30, d)), rng.normal(size=(30, d))

    def draw(centres, m):
        mean = centres[rng.integers(0, 30, m)] + 0.3 * rng.normal(size=(m, d))
        return mean.astype(np.float32), rng.uniform(0.02, 0.2, (m, d)).astype(np.float32)

    def recall(db, qm, qv):
        # nprobe 8 and 100 candidates, where the lists limit stage 1: the
        # default search's fit probes wider at this size, which would hide
        # the drift (tests/engine/churn_test.cc).
        got = db.search("c", mean=qm, var=qv, k=10, nprobe=8, candidates=100,
                        with_uncertainty=False).ids
        exact = db.search("c", mean=qm, var=qv, k=10, exhaustive=True,
                          with_uncertainty=False).ids
        return np.mean([len(set(g) & set(e)) / 10 for g, e in zip(got, exact)])

    results = {}
    for fraction in (0.0, 0.1):
        path = str(tmp_path / f"db{fraction}")
        with hedgedb.open(path, index_recheck_fraction=fraction, index_upkeep_inline=True) as db:
            db.create_collection("c", kind="gaussian", dim=d, index="IVF256,Flat",
                                 match_a=1.0, match_b=5.0)
            mean, var = draw(before, n)
            db.ingest("c", mean=mean, var=var, ids=np.arange(n))
            db.flush()
            for r in range(10):
                mean, var = draw(after, n // 10)
                db.ingest("c", mean=mean, var=var, ids=np.arange(n + r * n // 10,
                                                                 n + (r + 1) * n // 10))
                db.remove("c", np.arange(r * n // 10, (r + 1) * n // 10))
            qm, qv = draw(after, 200)
            results[fraction] = (recall(db, qm, qv), db.stats("c"))
    (off, off_stats), (on, on_stats) = results[0.0], results[0.1]
    assert off_stats["index_retrains"] == 0 and off_stats["index_upkeep_note"] == ""
    assert off_stats["index_changes_since_check"] == 2 * n
    assert on_stats["index_retrains"] >= 1
    assert on_stats["index_retraining"] is False
    assert on_stats["index_retrained_sequence"] > 1
    assert "recall estimate" in on_stats["index_retrain_reason"]
    assert on_stats["index_upkeep_note"].startswith(("retrained", "checked"))
    assert on_stats["index_vectors"] == on_stats["items"] == n
    assert off < 0.93 and on >= 0.97, (off, on)
    # The CLI prints the same fields (one list, hedgedb/fields.h; empty notes
    # left out); a new process reads the upkeep saved with the index file.
    out = subprocess.run([HEDGEDB, "stats", "--db", str(tmp_path / "db0.1")],
                         capture_output=True, text=True, check=True).stdout
    cli = json.loads(out)["collections"][0]
    for key in ("index_checked_sequence", "index_checked_time", "index_retrained_sequence",
                "index_retrained_time", "index_retrains", "index_changes_since_check",
                "index_retrain_reason", "index_upkeep_note"):
        assert cli[key] == on_stats[key], key
    assert cli["index_retraining"] is False
    # Out-of-range settings are refused as the C++ API refuses them.
    for bad in ({"index_recheck_fraction": -1.0}, {"index_retrain_recall": 1.5},
                {"index_retrain_imbalance": 0.5}):
        with pytest.raises(hedgedb.Error, match=next(iter(bad))):
            hedgedb.open(str(tmp_path / "bad"), **bad)


def test_the_lists_imbalance_is_reported_and_its_retrain_option_taken(tmp_path):
    # index_retrain_imbalance (hedgedb::Options; tests/engine/churn_test.cc
    # retrains for it): stats report the IVF lists' imbalance now and right
    # after the training (its baseline), as the CLI does; the option is a
    # keyword of open, 0 turns it off, a value under 1 is refused.
    path = str(tmp_path / "db")
    mean, var = gaussians(2000, 8, seed=4)
    with hedgedb.open(path, index_retrain_imbalance=2.0, index_recheck_fraction=0) as db:
        db.create_collection("c", kind="gaussian", dim=8, index="IVF16,Flat", match_a=1.0,
                             match_b=5.0)
        db.ingest("c", mean=mean, var=var, ids=np.arange(2000))
        db.flush()
        st = db.stats("c")
        assert st["index_trained"]
        assert st["index_imbalance"] >= 1.0
        assert st["index_imbalance_baseline"] == st["index_imbalance"]  # just trained
        db.remove("c", np.arange(0, 2000, 3))
        assert db.stats("c")["index_imbalance_baseline"] == st["index_imbalance_baseline"]
        now = db.stats("c")["index_imbalance"]
    out = subprocess.run([HEDGEDB, "stats", "--db", path],
                         capture_output=True, text=True, check=True).stdout
    cli = json.loads(out)["collections"][0]
    assert cli["index_imbalance_baseline"] == st["index_imbalance_baseline"]
    assert cli["index_imbalance"] == pytest.approx(now, rel=1e-9)
    with hedgedb.open(path, index_retrain_imbalance=0) as db:
        assert db.stats("c")["index_imbalance"] == pytest.approx(now, rel=1e-9)
    with pytest.raises(hedgedb.Error, match="index_retrain_imbalance"):
        hedgedb.open(path, index_retrain_imbalance=0.5)
    with hedgedb.open(str(tmp_path / "flat")) as db:  # no lists: not measured
        db.create_collection("c", kind="gaussian", dim=8, index="Flat", match_a=1.0, match_b=5.0)
        db.ingest("c", mean=mean, var=var, ids=np.arange(2000))
        db.flush()
        assert np.isnan(db.stats("c")["index_imbalance"])


def test_default_search_uses_the_fitted_candidates_and_explicit_ones_win(tmp_path):
    # The collection fits nprobe and the candidate count to the final
    # recall@10 when its index trains (docs/concepts.md, "Coarse indexes";
    # tests/engine/default_search_fit_test.cc is the C++ side): Python's
    # candidates=0 is that default, an explicit count wins, a negative one is
    # refused as the CLI refuses it.
    rng = np.random.default_rng(1)
    n, d = 4000, 8
    mean = rng.normal(size=(n, d)).astype(np.float32)
    var = rng.uniform(0.05, 1.5, (n, d)).astype(np.float32)
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("c", kind="gaussian", dim=d, index="IVF16,Flat", match_a=1.0,
                             match_b=1.0)
        db.ingest("c", mean=mean, var=var, ids=np.arange(n, dtype=np.int64))
        db.flush()
        st = db.stats("c")
        # Dense items of varied variance: more than the 100 of 10 x k (200).
        assert st["index_candidates"] > 100 and st["index_candidates"] % 10 == 0
        assert 0 <= st["index_recall_estimate"] <= 1 and 0 <= st["index_coarse_recall"] <= 1
        assert st["index_fit_seconds"] > 0
        r = db.search("c", mean=mean[:3], var=var[:3], k=10, with_uncertainty=False)
        assert list(r.scored) == [st["index_candidates"]] * 3
        r = db.search("c", mean=mean[:3], var=var[:3], k=10, candidates=30,
                      with_uncertainty=False)
        assert list(r.scored) == [30] * 3
        with pytest.raises(hedgedb.InvalidArgumentError, match="candidates must be >= 0"):
            db.search("c", mean=mean[:1], var=var[:1], k=10, candidates=-1)
