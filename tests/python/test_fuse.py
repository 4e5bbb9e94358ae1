"""hedgedb.fuse_gaussians: template fusion against a NumPy reference of the
product of Gaussians, on arrays, on stored items, and as a search query (the
same results as `hedgedb fuse --search`)."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))


def reference_product(mean, var):
    """The normalised product of diagonal Gaussians, in float64."""
    precision = (1.0 / var.astype(np.float64)).sum(axis=0)
    fused_var = 1.0 / precision
    fused_mean = fused_var * (mean.astype(np.float64) / var.astype(np.float64)).sum(axis=0)
    return fused_mean, fused_var


def gaussians(n, d, seed):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=(n, d)).astype(np.float32)
    var = rng.uniform(0.01, 2.0, size=(n, d)).astype(np.float32)
    return mean, var


@pytest.mark.parametrize("n", [1, 2, 7, 200])
def test_fusion_equals_the_numpy_product(n):
    mean, var = gaussians(n, 12, seed=n)
    fused_mean, fused_var = hedgedb.fuse_gaussians(mean, var)
    assert fused_mean.dtype == fused_var.dtype == np.float32
    assert fused_mean.shape == fused_var.shape == (12,)
    ref_mean, ref_var = reference_product(mean, var)
    np.testing.assert_allclose(fused_var, ref_var, rtol=1e-6)
    np.testing.assert_allclose(fused_mean, ref_mean, rtol=1e-6, atol=1e-6 * np.abs(ref_mean).max())
    assert np.all(fused_var <= var.min(axis=0))  # more certain than every item
    if n == 1:
        np.testing.assert_array_equal(fused_mean, mean[0])
        np.testing.assert_array_equal(fused_var, var[0])


def test_variance_forms_and_float64_input():
    mean, var = gaussians(5, 8, seed=3)
    expected = hedgedb.fuse_gaussians(mean, var)
    for name, values in {"std": np.sqrt(var), "log_var": np.log(var),
                         "log_std": 0.5 * np.log(var)}.items():
        got = hedgedb.fuse_gaussians(mean, **{name: values})
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    got = hedgedb.fuse_gaussians(mean.astype(np.float64), var.astype(np.float64).tolist())
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_bad_input_is_refused_as_ingest_refuses_it(tmp_path):
    mean, var = gaussians(3, 4, seed=4)
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("g", kind="gaussian", dim=4, index="Flat")
        for column, value in (("mean", np.nan), ("var", 0.0), ("var", -1.0), ("var", np.inf)):
            bad_mean, bad_var = mean.copy(), var.copy()
            (bad_mean if column == "mean" else bad_var)[2, 1] = value
            with pytest.raises(hedgedb.InvalidArgumentError) as ingest_error:
                db.ingest("g", mean=bad_mean, var=bad_var)
            with pytest.raises(hedgedb.InvalidArgumentError) as fuse_error:
                hedgedb.fuse_gaussians(bad_mean, bad_var)
            assert str(fuse_error.value) == str(ingest_error.value)
            assert "item 2" in str(fuse_error.value)
        assert db.stats("g")["items"] == 0
    with pytest.raises(hedgedb.InvalidArgumentError, match="empty"):
        hedgedb.fuse_gaussians(np.zeros((0, 4), np.float32), np.ones((0, 4), np.float32))
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"var: expected shape \(3, 4\)"):
        hedgedb.fuse_gaussians(mean, var[:, :3])
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"mean: expected shape \(n, D\)"):
        hedgedb.fuse_gaussians(mean[0], var[0])
    with pytest.raises(hedgedb.InvalidArgumentError, match="needs var"):
        hedgedb.fuse_gaussians(mean)
    with pytest.raises(hedgedb.InvalidArgumentError, match="give the variances once"):
        hedgedb.fuse_gaussians(mean, var, std=np.sqrt(var))


def test_fusing_stored_items_and_searching_with_the_template(tmp_path):
    """Several noisy views of one subject, fused, find that subject; the
    template is more certain than its views; the CLI fuses the same way."""
    rng = np.random.default_rng(7)
    d, classes, per_class = 16, 20, 6
    centres = rng.normal(size=(classes, d)).astype(np.float32)
    labels = np.repeat(np.arange(classes), per_class)
    var = rng.uniform(0.05, 1.0, size=(classes * per_class, d)).astype(np.float32)
    mean = (centres[labels] + rng.normal(size=var.shape) * np.sqrt(var)).astype(np.float32)
    path = str(tmp_path / "db")
    with hedgedb.open(path) as db:
        db.create_collection("faces", kind="gaussian", dim=d, index="Flat", match_b=2.0)
        db.ingest("faces", mean=mean, var=var, labels=labels)
        views = [int(i) for i in np.flatnonzero(labels == 4)[:3]]
        records = db.get("faces", views)
        stored_mean = np.stack([r["mean"] for r in records])
        stored_var = np.stack([r["var"] for r in records])
        t_mean, t_var = hedgedb.fuse_gaussians(stored_mean, stored_var)
        ref_mean, ref_var = reference_product(mean[views], var[views])
        np.testing.assert_allclose(t_var, ref_var, rtol=1e-6)
        np.testing.assert_allclose(t_mean, ref_mean, rtol=1e-6, atol=1e-6)

        res = db.search("faces", mean=t_mean[None], var=t_var[None], k=5, exhaustive=True,
                        seed=3)
        assert np.all(res.labels[0][:3] == 4)
        single = db.search("faces", mean=stored_mean, var=stored_var, k=1, exhaustive=True)
        assert res.query_uncertainty[0] < single.query_uncertainty.min()

        # Stored as a new item, it reads back as fused.
        (new_id,) = db.ingest("faces", mean=t_mean[None], var=t_var[None], labels=[4])
        got = db.get("faces", [new_id])[0]
        np.testing.assert_array_equal(got["mean"], t_mean)
        np.testing.assert_array_equal(got["var"], t_var)
        db.remove("faces", [new_id])
        expected = res

    # The command line fuses the same stored items to the same template and
    # search results.
    ids = ",".join(str(i) for i in views)
    out = subprocess.run([HEDGEDB, "fuse", "--db", path, "--collection", "faces", "--id", ids],
                         check=True, capture_output=True, text=True).stdout
    line = json.loads(out)
    np.testing.assert_allclose(line["mean"], t_mean, rtol=1e-6)
    np.testing.assert_allclose(line["var"], t_var, rtol=1e-6)
    out = subprocess.run([HEDGEDB, "fuse", "--db", path, "--collection", "faces", "--id", ids,
                          "--search", "--k", "5", "--exhaustive", "--seed", "3"],
                         check=True, capture_output=True, text=True).stdout
    hits = json.loads(out)["results"]
    assert [h["id"] for h in hits] == expected.ids[0].tolist()
    np.testing.assert_allclose([h["score"] for h in hits], expected.scores[0], rtol=1e-6)
