"""hedgedb.score_matrix: the public pairwise scoring (hedgedb/score.h
ScoreMatrix) from Python, checked against the scores' formulas computed
independently in NumPy (float64) and against what `hedgedb search
--exhaustive` prints for the same arrays."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))


def gaussians(rng, n, dim):
    mean = rng.standard_normal((n, dim)).astype(np.float32)
    var = (0.1 + rng.random((n, dim))).astype(np.float32)
    return mean, var


def mls(qm, qv, im, iv):
    """PFE's mutual likelihood score (docs/concepts.md), float64."""
    qm, qv, im, iv = (np.asarray(a, np.float64) for a in (qm, qv, im, iv))
    s = qv[:, None, :] + iv[None, :, :]
    d2 = (qm[:, None, :] - im[None, :, :]) ** 2
    dim = qm.shape[1]
    return -0.5 * np.sum(d2 / s + np.log(s), axis=-1) - 0.5 * dim * np.log(2 * np.pi)


def test_gaussian_scores_equal_their_formulas():
    rng = np.random.default_rng(3)
    qm, qv = gaussians(rng, 7, 16)
    im, iv = gaussians(rng, 11, 16)
    queries, items = {"mean": qm, "var": qv}, {"mean": im, "var": iv}
    got = hedgedb.score_matrix("gaussian", queries, items, score="mls")
    assert got.dtype == np.float32 and got.shape == (7, 11)
    # float32 arithmetic over 16 dimensions against float64: relative 1e-5.
    np.testing.assert_allclose(got, mls(qm, qv, im, iv), rtol=1e-5, atol=1e-5)

    d2 = np.sum((qm[:, None].astype(np.float64) - im[None]) ** 2, axis=-1)
    csd = -(d2 + qv.sum(1, dtype=np.float64)[:, None] + iv.sum(1, dtype=np.float64)[None])
    np.testing.assert_allclose(hedgedb.score_matrix("gaussian", queries, items, score="csd"),
                               csd, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(hedgedb.score_matrix("gaussian", queries, items, score="l2"),
                               -np.sqrt(d2), rtol=1e-5, atol=1e-6)
    a, b = 2.0, 3.0
    match = 1 / (1 + np.exp(a * np.sqrt(d2) - b))
    np.testing.assert_allclose(
        hedgedb.score_matrix("gaussian", queries, items, score="match", match_a=a, match_b=b),
        match, rtol=1e-5, atol=1e-6)
    # The other forms of the variances are converted, not misread.
    np.testing.assert_allclose(
        hedgedb.score_matrix("gaussian", {"mean": qm, "log_var": np.log(qv)},
                             {"mean": im, "std": np.sqrt(iv)}, score="mls"),
        got, rtol=1e-5, atol=1e-5)


def test_point_and_codes_scores_equal_their_formulas():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((5, 6)).astype(np.float32)
    x = rng.standard_normal((9, 6)).astype(np.float32)
    dist = np.linalg.norm(q[:, None].astype(np.float64) - x[None], axis=-1)
    np.testing.assert_allclose(hedgedb.score_matrix("point", {"vec": q}, {"vec": x}, score="l2"),
                               -dist, rtol=1e-5, atol=1e-6)
    # The default score of points is match: sigmoid(-a d + b).
    np.testing.assert_allclose(
        hedgedb.score_matrix("point", {"vec": q}, {"vec": x}, match_a=1.5, match_b=2.0),
        1 / (1 + np.exp(1.5 * dist - 2.0)), rtol=1e-5, atol=1e-6)

    d, k = 12, 4
    logits = rng.standard_normal((3, d, k))
    logp = (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(np.float32)
    codes = rng.integers(0, k, size=(8, d)).astype(np.int32)
    expected = np.array([[logp[i, np.arange(d), c].astype(np.float64).sum() for c in codes]
                         for i in range(3)])
    np.testing.assert_allclose(hedgedb.score_matrix("codes", {"logp": logp}, {"codes": codes}),
                               expected, rtol=1e-5, atol=1e-5)


def cli(args, cwd):
    result = subprocess.run([HEDGEDB] + [str(a) for a in args], cwd=cwd, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, (args, result.stderr)
    return result.stdout


@pytest.mark.parametrize("kind,score", [("gaussian", "mls"), ("gaussian", "mc"), ("mog", "mc"),
                                        ("mog", "csd")])
def test_scores_equal_the_cli_search(tmp_path, kind, score):
    """The numbers `hedgedb search --exhaustive` prints for the same arrays and
    the same spec (samples, seed, a, b): deterministic, so equal as float32."""
    rng = np.random.default_rng(5)
    n, q, dim, c = 30, 4, 8, 2
    shape = (n, c, dim) if kind == "mog" else (n, dim)
    qshape = (q, c, dim) if kind == "mog" else (q, dim)
    items = {"mean": rng.standard_normal(shape).astype(np.float32),
             "var": (0.2 + rng.random(shape)).astype(np.float32)}
    queries = {"mean": rng.standard_normal(qshape).astype(np.float32),
               "var": (0.2 + rng.random(qshape)).astype(np.float32)}
    if kind == "mog":
        w = rng.random((n, c)) + 0.2
        items["weights"] = (w / w.sum(1, keepdims=True)).astype(np.float32)
    for side, arrays in (("i", items), ("q", queries)):
        for name, a in arrays.items():
            np.save(tmp_path / f"{side}_{name}.npy", a)
    create = ["create", "--db", "db", "--collection", "c", "--kind", kind, "--dim", dim,
              "--match-a", 1.5, "--match-b", 2.5, "--samples", 16, "--seed", 9]
    if kind == "mog":
        create += ["--components", c]
    cli(create, tmp_path)
    ingest = ["ingest", "--db", "db", "--collection", "c", "--mean", "i_mean.npy", "--var",
              "i_var.npy"] + (["--weights", "i_weights.npy"] if kind == "mog" else [])
    cli(ingest, tmp_path)
    out = cli(["search", "--db", "db", "--collection", "c", "--mean", "q_mean.npy", "--var",
               "q_var.npy", "--k", n, "--exhaustive", "--score", score, "--no-uncertainty"],
              tmp_path)
    lines = [json.loads(line) for line in out.splitlines()]
    printed = np.full((q, n), np.nan, np.float32)
    for line in lines:
        for hit in line["results"]:
            printed[line["query"], hit["id"]] = hit["score"]  # ids 0..n-1
    got = hedgedb.score_matrix(kind, queries, items, score=score, samples=16, seed=9,
                               match_a=1.5, match_b=2.5)
    np.testing.assert_array_equal(got, printed)


def test_bad_input_names_the_array():
    rng = np.random.default_rng(6)
    qm, qv = gaussians(rng, 3, 4)
    im, iv = gaussians(rng, 5, 4)
    q, x = {"mean": qm, "var": qv}, {"mean": im, "var": iv}
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"queries\['mean'\]: expected shape"):
        hedgedb.score_matrix("gaussian", {"mean": qm[:, :3], "var": qv[:, :3]}, x)
    with pytest.raises(hedgedb.InvalidArgumentError,
                       match=r"items\['var'\] \(or std, log_var, log_std\) is missing for "
                             r"gaussian items"):
        hedgedb.score_matrix("gaussian", q, {"mean": im})
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"items: unknown array 'logp'"):
        hedgedb.score_matrix("gaussian", q, dict(x, logp=qm))
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"queries\['codes'\]|unknown array"):
        hedgedb.score_matrix("gaussian", dict(q, codes=im), x)
    with pytest.raises(hedgedb.InvalidArgumentError, match="unknown kind"):
        hedgedb.score_matrix("gauss", q, x)
    with pytest.raises(hedgedb.InvalidArgumentError, match="does not apply to gaussian"):
        hedgedb.score_matrix("gaussian", q, x, score="logprob")
    with pytest.raises(hedgedb.InvalidArgumentError, match="variance"):
        hedgedb.score_matrix("gaussian", q, {"mean": im, "var": -iv})
    with pytest.raises(hedgedb.InvalidArgumentError, match="give the variances once"):
        hedgedb.score_matrix("gaussian", dict(q, std=qv), x)
    with pytest.raises(hedgedb.InvalidArgumentError, match="expected a dict"):
        hedgedb.score_matrix("gaussian", qm, x)
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"queries\['vec'\] does not apply"):
        hedgedb.score_matrix("gaussian", dict(q, vec=qm), x)
