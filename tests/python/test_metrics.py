"""Retrieval metrics of a user's own embeddings, without a model:
`hedgedb evaluate --kind ... --labels ...` / `--db --collection`, and
hedgedb.metrics. Checked against an independent NumPy computation from the
definitions: gallery ranked by descending similarity, ties by ascending
gallery index; a query without another same-label item ("lone") is left out
of recall@k, MAP@R and R-precision (pytorch-metric-learning's convention);
KNN accuracy is a majority of the 5 nearest, over all queries."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import hedgedb

try:  # evaluate and hedgedb.metrics come with the encoders (LibTorch)
    import hedgedb.encoders  # noqa: F401
except ImportError:
    pytest.skip("hedgedb was built without the encoders", allow_module_level=True)
import hedgedb.metrics as metrics  # noqa: E402

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))
TOLERANCE = 1e-12  # the metrics are ratios of small integers


def reference(sim, query_labels, gallery_labels, exclude_self, ks=(1, 2, 4, 8), knn_k=5):
    """recall@k, MAP@R, R-precision, KNN accuracy from their definitions."""
    recall = {k: [] for k in ks}
    average_precision, r_precision, knn = [], [], []
    for q in range(sim.shape[0]):
        gallery = [g for g in range(sim.shape[1]) if not (exclude_self and g == q)]
        order = sorted(gallery, key=lambda g: (-sim[q, g], g))
        relevant = np.array([gallery_labels[g] == query_labels[q] for g in order])
        knn.append(2 * relevant[:knn_k].sum() > knn_k)
        r = int(relevant.sum())
        if r == 0:  # a lone query
            continue
        for k in ks:
            recall[k].append(relevant[:k].any())
        top = relevant[:r]
        precision_at_i = np.cumsum(top) / np.arange(1, r + 1)
        average_precision.append(float((precision_at_i * top).sum()) / r)
        r_precision.append(top.sum() / r)
    out = {f"recall_at_{k}": float(np.mean(v)) for k, v in recall.items()}
    out.update(map_at_r=float(np.mean(average_precision)), r_precision=float(np.mean(r_precision)),
               knn_accuracy=float(np.mean(knn)), queries=sim.shape[0],
               queries_with_relevant=len(average_precision))
    return out


def assert_metrics(got, want):
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=TOLERANCE), key


def point_case():
    """Integer points with many exact distance ties, one-item classes and
    duplicated rows."""
    rng = np.random.default_rng(3)
    vec = rng.integers(0, 3, size=(40, 2)).astype(np.float32)
    vec[5] = vec[17]  # identical items: exact ties in any score
    labels = np.repeat(np.arange(10), 4)[:40]
    labels[[3, 11, 29]] = [100, 101, 102]  # one-item classes: lone queries
    rng.shuffle(labels)
    return vec, labels


def l2_similarity(a, b):
    return -np.sqrt(((a[:, None, :].astype(np.float64) - b[None, :, :]) ** 2).sum(-1))


def gaussian_case():
    rng = np.random.default_rng(4)
    mean = rng.normal(size=(36, 3)).astype(np.float32)
    log_var = rng.normal(scale=0.5, size=(36, 3)).astype(np.float32)
    mean[7], log_var[7] = mean[20], log_var[20]
    labels = rng.integers(0, 8, size=36)
    labels[[0, 9]] = [50, 51]
    return mean, log_var, labels


def mls_similarity(m1, v1, m2, v2):
    s = v1[:, None, :].astype(np.float64) + v2[None, :, :]
    d2 = (m1[:, None, :].astype(np.float64) - m2[None, :, :]) ** 2
    return -0.5 * (d2 / s + np.log(s) + np.log(2 * np.pi)).sum(-1)


def evaluate(*args):
    run = subprocess.run([HEDGEDB, "evaluate", *map(str, args)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_cli_point_embeddings_match_the_definition(tmp_path):
    vec, labels = point_case()
    np.save(tmp_path / "vec.npy", vec)
    np.save(tmp_path / "labels.npy", labels)
    got = evaluate("--kind", "point", "--dim", 2, "--vec", tmp_path / "vec.npy", "--labels",
                   tmp_path / "labels.npy")
    want = reference(l2_similarity(vec, vec), labels, labels, exclude_self=True)
    assert want["queries_with_relevant"] == 37  # the three lone queries are left out
    assert_metrics(got, want)
    assert got["score"] == "l2" and got["leave_one_out"] is True


def test_cli_gaussian_log_var_mls_and_separate_queries(tmp_path):
    mean, log_var, labels = gaussian_case()
    var = np.exp(log_var.astype(np.float64))
    for name, array in [("mean", mean), ("log_var", log_var), ("labels", labels)]:
        np.save(tmp_path / f"{name}.npy", array)
    got = evaluate("--kind", "gaussian", "--dim", 3, "--mean", tmp_path / "mean.npy", "--log-var",
                   tmp_path / "log_var.npy", "--labels", tmp_path / "labels.npy", "--score",
                   "mls", "--bins", 4)
    assert_metrics(got, reference(mls_similarity(mean, var, mean, var), labels, labels, True))
    calibration = got["eta_calibration"]
    assert calibration["bin_sizes"] == [9, 9, 9, 9]
    assert calibration["bin_mean_eta"] == sorted(calibration["bin_mean_eta"])

    # The first 10 items as separate queries: nothing is left out, so the
    # lone item 0 finds itself and counts.
    np.save(tmp_path / "qmean.npy", mean[:10])
    np.save(tmp_path / "qlog_var.npy", log_var[:10])
    np.save(tmp_path / "qlabels.npy", labels[:10])
    got = evaluate("--kind", "gaussian", "--dim", 3, "--mean", tmp_path / "mean.npy", "--log-var",
                   tmp_path / "log_var.npy", "--labels", tmp_path / "labels.npy", "--query-mean",
                   tmp_path / "qmean.npy", "--query-log-var", tmp_path / "qlog_var.npy",
                   "--query-labels", tmp_path / "qlabels.npy", "--score", "mls")
    want = reference(mls_similarity(mean[:10], var[:10], mean, var), labels[:10], labels, False)
    assert_metrics(got, want)
    assert got["leave_one_out"] is False and got["queries_with_relevant"] == 10


def test_cli_collection_equals_its_labelled_items(tmp_path):
    vec, labels = point_case()
    db = tmp_path / "db"
    np.save(tmp_path / "vec.npy", vec)
    np.save(tmp_path / "labels.npy", labels)
    np.save(tmp_path / "extra.npy", np.full((3, 2), 9.0, dtype=np.float32))
    for args in (["create", "--db", db, "--collection", "c", "--kind", "point", "--dim", 2],
                 ["ingest", "--db", db, "--collection", "c", "--vec", tmp_path / "vec.npy",
                  "--labels", tmp_path / "labels.npy"],
                 # unlabelled items are not evaluated
                 ["ingest", "--db", db, "--collection", "c", "--vec", tmp_path / "extra.npy"]):
        run = subprocess.run([HEDGEDB, *map(str, args)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    got = evaluate("--db", db, "--collection", "c")
    assert_metrics(got, reference(l2_similarity(vec, vec), labels, labels, exclude_self=True))
    assert got["unlabelled_items_skipped"] == 3 and got["collection"] == "c"

    # A gaussian collection's spec (match a, b, samples, seed) scores its
    # items: the same report as the files with the same flags.
    mean, log_var, glabels = gaussian_case()
    for name, array in [("mean", mean), ("log_var", log_var), ("glabels", glabels)]:
        np.save(tmp_path / f"{name}.npy", array)
    spec = ["--kind", "gaussian", "--dim", 3, "--match-a", 2, "--match-b", 3]
    for args in (["create", "--db", db, "--collection", "g", *spec, "--samples", 16, "--seed", 5],
                 ["ingest", "--db", db, "--collection", "g", "--mean", tmp_path / "mean.npy",
                  "--log-var", tmp_path / "log_var.npy", "--labels", tmp_path / "glabels.npy"]):
        run = subprocess.run([HEDGEDB, *map(str, args)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    got = evaluate("--db", db, "--collection", "g", "--bins", 4)
    files = evaluate(*spec, "--samples", 16, "--seed", 5, "--mean", tmp_path / "mean.npy",
                     "--log-var", tmp_path / "log_var.npy", "--labels", tmp_path / "glabels.npy",
                     "--bins", 4)
    assert got["score"] == "mc" and got["samples"] == 16 and got["seed"] == 5
    assert {k: v for k, v in got.items() if k not in ("collection", "unlabelled_items_skipped")} \
        == files

    # Python: the same report from the collection.
    with hedgedb.open(str(db)) as handle:
        assert metrics.evaluate_collection(handle, "g", eta_bins=4) == got
        point = metrics.evaluate_collection(handle, "c")
    assert_metrics(point, reference(l2_similarity(vec, vec), labels, labels, exclude_self=True))
    assert point["unlabelled_items_skipped"] == 3


@pytest.mark.parametrize("args, code, message", [
    (["--kind", "point", "--dim", 2, "--vec", "{vec}", "--labels", "{short}"], 1,
     "labels must have shape (40,), got (39,)"),
    (["--kind", "point", "--dim", 2, "--vec", "{vec}"], 2, "--labels is required"),
    (["--kind", "gaussian", "--dim", 2, "--vec", "{vec}", "--labels", "{labels}"], 2,
     "--vec does not apply to items of a gaussian collection (gaussian items take mean and "
     "var)"),
    (["--kind", "point", "--dim", 3, "--vec", "{vec}", "--labels", "{labels}"], 1,
     "(--vec): expected shape (n, 3), got (40, 2)"),
    (["--model", "m.hdbm", "--kind", "point", "--dim", 2, "--vec", "{vec}", "--labels",
      "{labels}"], 2, "--model and --vec do not go together"),
    ([], 2, "evaluate needs --model FILE, or embeddings"),
    (["--kind", "point", "--dim", 2, "--vec", "{vec}", "--labels", "{labels}", "--query-vec",
      "{vec}"], 2, "--query-labels is required"),
    (["--kind", "codes", "--dim", 2, "--code-k", 3, "--codes", "{labels2}", "--labels",
      "{labels}"], 2, "codes are queried with log-probability tables"),
    (["--db", "{tmp}/nowhere", "--collection", "c", "--labels", "{labels}"], 2,
     "--labels does not go with --db"),
    (["--kind", "point", "--dim", 2, "--vec", "{vec}", "--labels", "{labels}", "--score", "mls"],
     1, "score 'mls' does not apply to point"),
    (["--kind", "point", "--dim", 2, "--vec", "{vec}", "--labels", "{labels}", "--recall-k",
      "1,0"], 2, "--recall-k: every k must be >= 1, got 0"),
    (["--kind", "point", "--dim", 2, "--vec", "{vec}", "--labels", "{labels}", "--recall-k",
      "1,40"], 1, "k up to 40 (KNN k 5) but only 39 gallery items are ranked per query"),
])
def test_cli_refuses_bad_input(tmp_path, args, code, message):
    vec, labels = point_case()
    files = {"vec": vec, "labels": labels, "short": labels[:39],
             "labels2": np.stack([labels % 3, labels % 3], axis=1)}
    for name, array in files.items():
        np.save(tmp_path / f"{name}.npy", array)
    args = [str(a).format(tmp=tmp_path, **{n: tmp_path / f"{n}.npy" for n in files})
            for a in args]
    run = subprocess.run([HEDGEDB, "evaluate", *args], capture_output=True, text=True)
    assert run.returncode == code, run.stderr
    assert message in run.stderr


def test_python_metrics_match_the_definition():
    vec, labels = point_case()
    sim = l2_similarity(vec, vec)
    want = reference(sim, labels, labels, exclude_self=True)
    assert_metrics(metrics.retrieval(sim, labels), want)
    assert_metrics(metrics.evaluate_embeddings("point", vec=vec, labels=labels), want)
    # Separate queries: no leave-one-out unless asked for.
    want = reference(sim[:12], labels[:12], labels, exclude_self=False, ks=(1, 3))
    assert_metrics(metrics.retrieval(sim[:12], labels, labels[:12], ks=(1, 3)), want)
    assert_metrics(metrics.evaluate_embeddings("point", vec=vec, labels=labels,
                                               queries={"vec": vec[:12]},
                                               query_labels=labels[:12], ks=(1, 3)), want)

    mean, log_var, glabels = gaussian_case()
    var = np.exp(log_var.astype(np.float64))
    got = metrics.evaluate_embeddings("gaussian", mean=mean, log_var=log_var, labels=glabels,
                                      score="mls", eta_bins=4)
    assert_metrics(got, reference(mls_similarity(mean, var, mean, var), glabels, glabels, True))
    assert got["eta_calibration"]["bin_sizes"] == [9, 9, 9, 9]


def test_score_blocks_do_not_change_the_metrics():
    """The score matrix is computed in blocks of queries (64 MB by default);
    blocks of one and of seven queries give the same numbers, Monte Carlo
    scores included (each query's samples do not depend on its block)."""
    mean, log_var, labels = gaussian_case()
    var = np.exp(log_var.astype(np.float64))
    want = reference(mls_similarity(mean, var, mean, var), labels, labels, True)
    whole = metrics.evaluate_embeddings("gaussian", mean=mean, log_var=log_var, labels=labels,
                                        match_a=2.0, match_b=3.0, eta_bins=4)
    for block_floats in (1, 7 * 36):
        got = metrics.evaluate_embeddings("gaussian", mean=mean, log_var=log_var, labels=labels,
                                          score="mls", _block_floats=block_floats)
        assert_metrics(got, want)
        assert metrics.evaluate_embeddings("gaussian", mean=mean, log_var=log_var, labels=labels,
                                           match_a=2.0, match_b=3.0, eta_bins=4,
                                           _block_floats=block_floats) == whole


def test_python_metrics_refuse_bad_input():
    vec, labels = point_case()
    sim = l2_similarity(vec, vec)
    with pytest.raises(hedgedb.InvalidArgumentError, match="expected shape"):
        metrics.retrieval(sim[:, :30], labels)
    with pytest.raises(hedgedb.InvalidArgumentError, match="39 labels for 40 items"):
        metrics.evaluate_embeddings("point", vec=vec, labels=labels[:39])
    with pytest.raises(hedgedb.InvalidArgumentError, match="mean does not apply"):
        metrics.evaluate_embeddings("point", vec=vec, mean=vec, labels=labels)
    # The score matrix comes in blocks; an error still names the row of the input.
    bad_vec = vec.copy()
    bad_vec[30, 1] = np.nan
    with pytest.raises(hedgedb.InvalidArgumentError, match="query 30 is not finite"):
        metrics.evaluate_embeddings("point", vec=bad_vec, labels=labels, _block_floats=1)
    with pytest.raises(hedgedb.InvalidArgumentError, match="is NaN"):
        bad = sim.copy()
        bad[0, 1] = np.nan
        metrics.retrieval(bad, labels)
    with pytest.raises(hedgedb.InvalidArgumentError, match="only 8 gallery items"):
        metrics.retrieval(sim[:9, :9], labels[:9], ks=(1, 9))
