"""`hedgedb evaluate` on embedding files: the error-versus-reject area of
recall@1 by eta (eta_calibration.erc_area) against NumPy. Ten tight Gaussians
(two per class, variance 1e-4) whose nearest item by MLS is their class mate,
five broad ones (variance 100) sitting on the next class's pair, whose
nearest item is of that other class, and one lone item. Eta (1 - p(m|x,x))
is near 1 - sigmoid(1) for the tight ones and near 1 for the broad ones
whatever the Monte Carlo draws, so ranking by eta keeps the ten right
answers first: the area equals the oracle's, computed here from its
definition; chance is 1 - recall@1, and the lone item is left out. The same
two groups fill the first and the last of 4 bins of equal eta width
(eta_calibration.equal_width), as NumPy's histogram of the two levels does,
where the equal-count bins hold 4 items each."""

import json
import os
import pathlib
import subprocess

import numpy as np

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))


def mls(m1, v1, m2, v2):
    s = v1[:, None, :] + v2[None, :, :]
    return -0.5 * (((m1[:, None, :] - m2[None, :, :]) ** 2) / s + np.log(s)).sum(-1)


def error_reject_area(confidence, correct):
    """The definition, for distinct confidences: the error of the m most
    confident averaged over m = 1..n."""
    order = np.argsort(-confidence, kind="stable")
    wrong = np.cumsum(~correct[order])
    return float(np.mean(wrong / np.arange(1, len(order) + 1)))


def evaluate_gaussians(tmp_path, mean, var, labels):
    """`hedgedb evaluate` of 3-D Gaussians by MLS, a = b = 1, 4 eta bins."""
    for name, array in (("mean", mean.astype(np.float32)), ("var", var.astype(np.float32)),
                        ("labels", labels)):
        np.save(tmp_path / f"{name}.npy", array)
    run = subprocess.run([HEDGEDB, "evaluate", "--kind", "gaussian", "--dim", "3", "--mean", tmp_path / "mean.npy",
                          "--var", tmp_path / "var.npy", "--labels", tmp_path / "labels.npy", "--score", "mls",
                          "--match-a", "1", "--match-b", "1", "--bins", "4"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_erc_area_of_recall_at_1_by_eta(tmp_path):
    mean, var, labels = [], [], []
    for c in range(5):  # tight pairs of class c at x = 10 c
        for offset in (0.0, 0.01):
            mean.append([10.0 * c + offset, 0, 0])
            var.append([1e-4] * 3)
            labels.append(c)
    for c in range(5):  # broad items of class c on class (c + 1)'s pair
        mean.append([10.0 * ((c + 1) % 5), 0, 0])
        var.append([100.0] * 3)
        labels.append(c)
    mean.append([500.0, 0, 0])  # a lone item (no class mate)
    var.append([1e-4] * 3)
    labels.append(99)
    mean, var, labels = np.array(mean), np.array(var), np.array(labels)
    got = evaluate_gaussians(tmp_path, mean, var, labels)

    sim = mls(mean, var, mean, var)
    np.fill_diagonal(sim, -np.inf)  # leave-one-out
    top1 = labels[np.argmax(sim, axis=1)] == labels
    counted = labels != 99  # the lone query has no recall@1 outcome
    assert top1[:10].all() and not top1[10:15].any()
    eta_proxy = np.where(var[:, 0] < 1, 0.27, 1.0)[counted]  # tight first; order within a group is moot
    want = error_reject_area(-eta_proxy - 1e-9 * np.arange(counted.sum()), top1[counted])
    c = got["eta_calibration"]
    assert c["erc_queries"] == 15
    assert got["recall_at_1"] == 10 / 15
    assert abs(c["erc_area"] - want) < 1e-12, (c, want)
    assert abs(c["erc_area_oracle"] - want) < 1e-12
    assert abs(c["erc_area_chance"] - 5 / 15) < 1e-12
    assert abs(want - sum((m - 10) / m for m in range(11, 16)) / 15) < 1e-15

    # Equal-width bins: the 11 tight items (the lone one too: every query has
    # an eta) in the first, the 5 broad ones in the last, two empty bins
    # between (no accuracy, no mean eta).
    assert c["binning"] == "equal_count" and c["bin_sizes"] == [4, 4, 4, 4]
    width = c["equal_width"]
    eta_levels = np.where(var[:, 0] < 1, 1 - 1 / (1 + np.exp(-1.0)), 1.0)
    want_sizes, _ = np.histogram(eta_levels, bins=4, range=(eta_levels.min(), eta_levels.max()))
    assert width["binning"] == "equal_width"
    assert width["bin_sizes"] == want_sizes.tolist() == [11, 0, 0, 5], width
    assert width["bin_performance"][1] is None and width["bin_performance"][2] is None
    assert width["bin_mean_eta"][1] is None and width["bin_mean_eta"][2] is None
    assert width["bin_mean_eta"][0] < 0.3 < 0.9 < width["bin_mean_eta"][3]


def test_equal_width_tau_against_numpy(tmp_path):
    # Three tight items per class (the two class mates and the broad item of
    # class c on the next spot among the 5 most similar: a majority, right,
    # but for the last spot) and one broad
    # item per class on the next class's spot (its 3 most similar are that
    # class's: wrong). Eta is near 1 - sigmoid(1) for the tight items and
    # near 1 for the broad ones: 4 equal-width bins hold 15, 0, 0, 5 and KNN
    # accuracy falls from the first filled bin to the last, tau 1 (flipped).
    mean, var, labels = [], [], []
    for c in range(5):
        for offset in (0.0, 0.01, 0.02):
            mean.append([10.0 * c + offset, 0, 0])
            var.append([1e-4] * 3)
            labels.append(c)
    for c in range(5):
        mean.append([10.0 * ((c + 1) % 5), 0, 0])
        var.append([100.0] * 3)
        labels.append(c)
    mean, var, labels = np.array(mean), np.array(var), np.array(labels)
    width = evaluate_gaussians(tmp_path, mean, var, labels)["eta_calibration"]["equal_width"]

    sim = mls(mean, var, mean, var)
    np.fill_diagonal(sim, -np.inf)  # leave-one-out
    n = len(labels)
    order = np.lexsort((np.tile(np.arange(n), (n, 1)), -sim), axis=1)[:, :5]  # ties by index
    knn = (labels[order] == labels[:, None]).sum(1) > 2
    tight = var[:, 0] < 1
    # Class 4's spot has a neighbour spot on one side only: its tight items
    # miss (12 of 15 right).
    assert knn[tight].sum() == 12 and not knn[~tight].any()
    eta_levels = np.where(tight, 1 - 1 / (1 + np.exp(-1.0)), 1.0)
    want_sizes, _ = np.histogram(eta_levels, bins=4, range=(eta_levels.min(), eta_levels.max()))
    assert width["bin_sizes"] == want_sizes.tolist() == [15, 0, 0, 5], width
    assert width["bin_performance"] == [knn[tight].mean(), None, None, knn[~tight].mean()], width
    # Kendall's tau-b of (bin, accuracy) over the filled bins, sign flipped.
    bins, accuracy = np.array([0, 3]), np.array([knn[tight].mean(), knn[~tight].mean()])
    concordant = np.sign(bins[1] - bins[0]) * np.sign(accuracy[1] - accuracy[0])
    assert width["kendall_tau"] == -float(concordant) == 1.0
