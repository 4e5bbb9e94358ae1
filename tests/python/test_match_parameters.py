"""The default match parameters (match_a = 1, match_b = 0) cannot express a
match: create_collection and search warn with hedgedb.MatchParametersWarning,
naming the fix, as `hedgedb create` and `search` do (MatchParametersNote)."""

import warnings

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")


@pytest.fixture
def db(tmp_path):
    with hedgedb.open(str(tmp_path / "db")) as handle:
        yield handle


def items():
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(50, 16)).astype(np.float32)
    var = rng.uniform(0.05, 0.5, size=(50, 16)).astype(np.float32)
    return mean, var


def no_warning():
    """A context in which any warning fails the test."""
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("error")
    return context


def test_default_match_parameters_warn_naming_the_fix(db):
    mean, var = items()
    with pytest.warns(hedgedb.MatchParametersWarning, match=r"match_b = 0 <= 0") as caught:
        db.create_collection("d", "gaussian", 16)
    text = str(caught[0].message)
    for fix in ("match_a and match_b", "hedgedb train", "mls"):
        assert fix in text, text
    db.ingest("d", mean=mean, var=var)
    with pytest.warns(hedgedb.MatchParametersWarning):
        res = db.search("d", mean=mean[:5], var=var[:5], k=1, exhaustive=True)
    # What it says: each item finds itself first, with a score below 0.5,
    # and every eta is at least 0.5 (the issue saw 0.07 in 16 dimensions).
    assert np.array_equal(res.ids[:, 0], np.arange(5))
    assert np.all(res.scores[:, 0] < 0.5), res.scores
    assert np.all(res.query_uncertainty >= 0.5), res.query_uncertainty
    assert np.all(res.uncertainties[:, 0] >= 0.5), res.uncertainties

    # A score and no eta that read neither a nor b: no warning.
    context = no_warning()
    try:
        db.search("d", mean=mean[:5], var=var[:5], k=1, score="mls", with_uncertainty=False)
    finally:
        context.__exit__(None, None, None)


def test_learned_match_parameters_do_not_warn(db):
    mean, var = items()
    context = no_warning()
    try:
        db.create_collection("g", "gaussian", 16, match_a=1.0, match_b=4.0)
        db.ingest("g", mean=mean, var=var)
        res = db.search("g", mean=mean[:5], var=var[:5], k=1, exhaustive=True)
        db.create_collection("c", "codes", 4, code_k=4)
    finally:
        context.__exit__(None, None, None)
    assert np.all(res.scores[:, 0] > 0.5), res.scores
    assert np.all(res.query_uncertainty < 0.5), res.query_uncertainty


def test_the_warning_can_be_an_error(db):
    with warnings.catch_warnings():
        warnings.simplefilter("error", hedgedb.MatchParametersWarning)
        with pytest.raises(hedgedb.MatchParametersWarning):
            db.create_collection("p", "point", 4)
    # The collection was created before the warning: it exists.
    assert "p" in db.list_collections()


# ---- Fitted from labelled items: calibrate and evaluate choose a and b ----

import json
import os
import pathlib
import subprocess

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))


def clusters(n=600, classes=10, dim=8, seed=1):
    """Labelled Gaussians around class centres; noise and variance vary per item."""
    rng = np.random.default_rng(seed)
    centres = 2.0 * np.random.default_rng(1234).normal(size=(classes, dim))
    labels = rng.integers(0, classes, size=n)
    noise = 0.3 + 1.5 * rng.uniform(size=(n, 1))
    mean = (centres[labels] + noise * rng.normal(size=(n, dim))).astype(np.float32)
    var = (0.05 + noise ** 2 * rng.uniform(size=(n, dim))).astype(np.float32)
    return mean, var, labels.astype(np.int64)


def numpy_fit(mean, var, labels, pairs=3000, draws=16, seed=5):
    """The balanced maximum-likelihood (a, b) of HIB's Monte Carlo match
    probability, found independently: its own pairs and draws, and a grid
    search refined three times."""
    rng = np.random.default_rng(seed)
    n = len(labels)
    same = labels[:, None] == labels[None, :]
    iu = np.triu_indices(n, 1)
    pos = np.flatnonzero(same[iu])
    neg = np.flatnonzero(~same[iu])
    pick = np.concatenate([rng.choice(pos, pairs, replace=False), rng.choice(neg, pairs, replace=False)])
    i, j = iu[0][pick], iu[1][pick]
    y = np.concatenate([np.ones(pairs), np.zeros(pairs)])

    def draw(rows):
        return mean[rows][:, None, :] + np.sqrt(var[rows])[:, None, :] * rng.normal(
            size=(len(rows), draws, mean.shape[1]))

    d = np.linalg.norm(draw(i) - draw(j), axis=2)  # (pairs, draws)

    def loss(a, b):
        p = (1.0 / (1.0 + np.exp(np.clip(a * d - b, -50, 50)))).mean(axis=1)
        p = np.clip(p, 1e-12, 1 - 1e-12)
        return -0.5 * np.log(p[y == 1]).mean() - 0.5 * np.log1p(-p[y == 0]).mean()

    a_grid, b_grid = np.linspace(0.05, 5, 40), np.linspace(-5, 20, 40)
    for _ in range(4):
        values = np.array([[loss(a, b) for b in b_grid] for a in a_grid])
        ia, ib = np.unravel_index(np.argmin(values), values.shape)
        a0, b0 = a_grid[ia], b_grid[ib]
        da, db = a_grid[1] - a_grid[0], b_grid[1] - b_grid[0]
        a_grid = np.linspace(max(a0 - 2 * da, 1e-3), a0 + 2 * da, 21)
        b_grid = np.linspace(b0 - 2 * db, b0 + 2 * db, 21)
    return a0, b0


def numpy_fits(mean, var, labels):
    """numpy_fit over three seeds of its own (each seed's a varies by about
    8% from the mean: the sampling error of 6,000 pairs), averaged."""
    fits = np.array([numpy_fit(mean, var, labels, seed=seed) for seed in (5, 6, 7)])
    return fits[:, 0].mean(), fits[:, 1].mean()


def test_calibrate_fits_default_match_parameters_to_the_labels(db):
    mean, var, labels = clusters()
    with pytest.warns(hedgedb.MatchParametersWarning):
        db.create_collection("g", "gaussian", 8)
    db.ingest("g", mean=mean, var=var, labels=labels)
    # keep: a map of the defaults' scores, and the parameters stay.
    kept = db.calibrate("g", max_pairs=30000, match_parameters="keep")
    assert not kept["match_parameters_fitted"]
    assert db.describe("g")["match_b"] == 0.0

    report = db.calibrate("g", max_pairs=30000)
    assert report["match_parameters_fitted"] and report["stored"]
    assert (report["match_a_before"], report["match_b_before"]) == (1.0, 0.0)
    spec = db.describe("g")
    assert spec["match_a"] == pytest.approx(report["match_a"], rel=1e-6)
    assert spec["match_b"] == pytest.approx(report["match_b"], rel=1e-6)
    # Independent NumPy fits (other pairs, other draws) find the same optimum
    # within their sampling error; the distance where p = 1/2, b / a, is
    # pinned down far more tightly than a and b alone.
    a, b = numpy_fits(mean, var, labels)
    assert report["match_a"] == pytest.approx(a, rel=0.1), (report["match_a"], a)
    assert report["match_b"] == pytest.approx(b, rel=0.1), (report["match_b"], b)
    assert report["match_b"] / report["match_a"] == pytest.approx(b / a, rel=0.03)

    # The parameters now express a match: no warning, the best match of each
    # item scores above 0.5 (the defaults kept every score below), and eta
    # falls below 0.5.
    context = no_warning()
    try:
        res = db.search("g", mean=mean[:20], var=var[:20], k=1, exhaustive=True)
    finally:
        context.__exit__(None, None, None)
    assert np.all(res.scores[:, 0] > 0.5), res.scores
    assert np.all(res.query_uncertainty < 0.5), res.query_uncertainty
    assert np.all(np.isfinite(res.probs))


def test_fit_and_bad_values_are_refused_as_the_cli_refuses_them(db, tmp_path):
    db.create_collection("p", "point", 4, match_a=1.0, match_b=2.0)
    rng = np.random.default_rng(0)
    db.ingest("p", vec=rng.normal(size=(100, 4)).astype(np.float32),
              labels=rng.integers(0, 4, size=100))
    with pytest.raises(hedgedb.InvalidArgumentError, match="no match parameters to fit"):
        db.calibrate("p", match_parameters="fit")
    with pytest.raises(hedgedb.InvalidArgumentError, match="'auto', 'fit' or 'keep'"):
        db.calibrate("p", match_parameters="maybe")
    assert db.stats("p")["calibrations"] == []
    db.close()
    for value, phrase in (("fit", "no match parameters to fit"), ("maybe", "auto")):
        out = subprocess.run([HEDGEDB, "calibrate", "--db", str(tmp_path / "db"),
                              "--collection", "p", "--match-parameters", value],
                             capture_output=True, text=True)
        assert out.returncode != 0 and phrase in out.stderr, out.stderr


def test_cli_calibrate_reports_the_fit(tmp_path):
    mean, var, labels = clusters(n=300)
    for name, array in (("mean", mean), ("var", var), ("labels", labels)):
        np.save(tmp_path / f"{name}.npy", array)
    run = lambda *args: subprocess.run([HEDGEDB, *args], capture_output=True, text=True,
                                       check=True).stdout
    dbdir = str(tmp_path / "clidb")
    run("create", "--db", dbdir, "--collection", "g", "--kind", "gaussian", "--dim", "8")
    run("ingest", "--db", dbdir, "--collection", "g", "--mean", str(tmp_path / "mean.npy"),
        "--var", str(tmp_path / "var.npy"), "--labels", str(tmp_path / "labels.npy"))
    table = run("calibrate", "--db", dbdir, "--collection", "g", "--format", "table")
    assert "match parameters fitted to the labelled pairs: match_a 1 ->" in table, table
    stats = json.loads(run("stats", "--db", dbdir, "--collection", "g"))
    assert stats["match_b"] > 0


def test_evaluate_fits_them_unless_given(tmp_path):
    metrics = pytest.importorskip("hedgedb.metrics")  # needs the encoders build
    mean, var, labels = clusters()
    fitted = metrics.evaluate_embeddings("gaussian", mean=mean, var=var, labels=labels)
    assert fitted["match_parameters"] == "fitted"
    a, b = numpy_fits(mean, var, labels)
    assert fitted["match_a"] == pytest.approx(a, rel=0.1)
    assert fitted["match_b"] == pytest.approx(b, rel=0.1)
    assert fitted["match_b"] / fitted["match_a"] == pytest.approx(b / a, rel=0.03)
    given = metrics.evaluate_embeddings("gaussian", mean=mean, var=var, labels=labels,
                                                match_a=1.0, match_b=0.0)
    assert given["match_parameters"] == "given"
    assert (given["match_a"], given["match_b"]) == (1.0, 0.0)
    # The uncertainty is the fitted model's: every eta below 0.5, not above.
    assert fitted["mean_eta"] < 0.5 < given["mean_eta"]
    # The CLI does the same from .npy files.
    for name, array in (("mean", mean), ("var", var), ("labels", labels)):
        np.save(tmp_path / f"{name}.npy", array)
    out = subprocess.run([HEDGEDB, "evaluate", "--kind", "gaussian", "--dim", "8",
                          "--mean", str(tmp_path / "mean.npy"), "--var", str(tmp_path / "var.npy"),
                          "--labels", str(tmp_path / "labels.npy"), "--no-progress"],
                         capture_output=True, text=True, check=True)
    cli = json.loads(out.stdout)
    assert cli["match_parameters"] == "fitted"
    # One writer, the library, and floats as the floats they are: the same
    # shortest text in both front ends (not 0.9300000071525879 in one).
    assert (cli["match_a"], cli["match_b"]) == (fitted["match_a"], fitted["match_b"])
    for v in (fitted["match_a"], fitted["match_b"]):
        assert repr(v) == str(np.float32(v)), v
    assert cli["map_at_r"] == pytest.approx(fitted["map_at_r"], abs=1e-12)
