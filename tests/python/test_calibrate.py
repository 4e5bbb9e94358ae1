"""db.calibrate: the binding of DB::Calibrate (docs/calibration.md). The
conditional map by default, the report as a dict, held-out queries, and the
input the CLI's `calibrate` refuses is refused here too."""

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")


def clustered(rng, n, classes, dim, centres):
    labels = rng.integers(0, classes, n)
    noise = 0.3 + 1.5 * rng.random(n)  # noisy items are the uncertain ones
    mean = centres[labels] + noise[:, None] * rng.standard_normal((n, dim))
    var = 0.05 + noise[:, None] ** 2 * rng.random((n, dim))
    return mean.astype(np.float32), var.astype(np.float32), labels.astype(np.int64)


@pytest.fixture
def db(tmp_path):
    with hedgedb.open(str(tmp_path / "db")) as handle:
        yield handle


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    centres = 2.0 * rng.standard_normal((10, 8))
    return clustered(rng, 600, 10, 8, centres), clustered(rng, 200, 10, 8, centres)


def test_calibrate_fits_the_conditional_map_and_reports(db, data):
    (mean, var, labels), (qmean, qvar, qlabels) = data
    db.create_collection("c", "gaussian", 8, match_b=2.0)
    db.ingest("c", mean=mean, var=var, labels=labels)
    report = db.calibrate("c")
    assert report["stored"] is True
    assert report["score"] == "mc"
    assert report["method"] == "conditional"
    assert report["conditional"] is True
    assert "query eta" in report["conditioned_on"]
    assert report["pairs"] == 600 * 599
    assert report["queries"] == 600
    after = report["after"]
    for key in ("ece", "ece_top1", "ece_top10", "brier", "log_loss"):
        assert 0 <= after[key] < 1, key
    assert len(after["eta_quartiles"]) == 4
    assert sum(g["queries"] for g in after["eta_quartiles"]) == 600
    for g in after["eta_quartiles"]:
        assert g["eta_lo"] <= g["eta_hi"]
        assert g["gap"] == pytest.approx(g["mean_top1_prob"] - g["precision_at_1"])
    assert after["worst_eta_gap"] == pytest.approx(max(abs(g["gap"]) for g in after["eta_quartiles"]))
    # Error-versus-reject areas: the oracle is the least possible, and the
    # calibrated probability orders the answers better than chance.
    for key in ("erc_area_eta", "erc_area_prob", "erc_area_oracle"):
        assert 0 <= after[key] <= 1, key
    assert after["erc_area_oracle"] <= min(after["erc_area_eta"], after["erc_area_prob"])
    assert after["erc_area_prob"] < 1 - after["precision_at_1"]
    (stats,) = db.stats("c")["calibrations"]
    assert stats["conditional"] is True and stats["method"] == "conditional"

    # Searches carry the map's probabilities; the best hit's does not depend
    # on k (exact ranking).
    one = db.search("c", mean=qmean, var=qvar, k=1, exhaustive=True)
    ten = db.search("c", mean=qmean, var=qvar, k=10, exhaustive=True)
    assert np.all(np.isfinite(ten.probs))
    assert np.array_equal(one.ids[:, 0], ten.ids[:, 0])
    assert np.array_equal(one.probs[:, 0], ten.probs[:, 0])

    # The score alone, held-out queries, and a dry run that stores nothing.
    plain = db.calibrate("c", unconditional=True, dry_run=True)
    assert plain["conditional"] is False and plain["method"] != "conditional"
    assert plain["stored"] is False
    held = db.calibrate("c", mean=qmean, var=qvar, query_labels=qlabels, dry_run=True)
    assert held["queries"] == 200 and held["pairs"] == 200 * 600
    # Precision@1 of the held-out queries, recomputed from an exhaustive
    # search: the best item of each query (the report ranks every item).
    assert held["before"]["precision_at_1"] == pytest.approx(
        np.mean(ten.labels[:, 0] == qlabels))
    (stats,) = db.stats("c")["calibrations"]
    assert stats["conditional"] is True  # the dry runs stored nothing


def test_conformal_sets(db, data):
    (mean, var, labels), (qmean, qvar, qlabels) = data
    db.create_collection("c", "gaussian", 8, match_b=2.0)
    db.ingest("c", mean=mean, var=var, labels=labels)
    with pytest.raises(hedgedb.InvalidArgumentError, match="coverage needs a calibration"):
        db.search("c", mean=qmean, var=qvar, coverage=0.9)
    report = db.calibrate("c", conformal_fraction=0.5)
    assert report["conformal_queries"] == 300 and report["queries"] == 300
    sets = db.search("c", mean=qmean, var=qvar, coverage=0.8)
    covered = np.mean([np.any(sets.labels[q][sets.ids[q] >= 0] == qlabels[q])
                       for q in range(len(qlabels))])
    # 200 fresh queries, 300 conformal ones: the guarantee is >= 0.8 on
    # average over draws; one draw wobbles by a few points.
    assert 0.7 <= covered <= 0.95, covered
    by_eta = db.search("c", mean=qmean, var=qvar, coverage=0.8, coverage_by_eta=True)
    assert by_eta.ids.shape[0] == len(qlabels)
    with pytest.raises(hedgedb.InvalidArgumentError, match="needs a coverage"):
        db.search("c", mean=qmean, var=qvar, coverage_by_eta=True)
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"\(0, 1\)"):
        db.search("c", mean=qmean, var=qvar, coverage=1.5)
    with pytest.raises(hedgedb.InvalidArgumentError, match="exclude"):
        db.search("c", mean=qmean, var=qvar, coverage=0.8, min_prob=0.5)
    with pytest.raises(hedgedb.InvalidArgumentError, match="at least 999 conformal queries"):
        db.search("c", mean=qmean, var=qvar, coverage=0.999)
    with pytest.raises(hedgedb.InvalidArgumentError, match="conformal_fraction"):
        db.calibrate("c", conformal_fraction=1.0)


def test_false_match_rate(db, data):
    (mean, var, labels), (qmean, qvar, qlabels) = data
    db.create_collection("c", "gaussian", 8, match_b=2.0)
    db.ingest("c", mean=mean, var=var, labels=labels)
    db.calibrate("c")
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"\(conformal_fraction\)"):
        db.search("c", mean=qmean, var=qvar, max_false_match_rate=0.05)
    report = db.calibrate("c", conformal_fraction=0.5)
    # 300 held-out queries, each against the 599 other items: the pairs of
    # another label.
    n_other = sum(600 - np.sum(labels == labels[i]) for i in range(600))
    assert 0 < report["held_out_non_matches"] <= n_other
    assert db.stats("c")["calibrations"][0]["held_out_non_matches"] == \
        report["held_out_non_matches"]
    found = db.search("c", mean=qmean, var=qvar, max_false_match_rate=0.05, max_results=600)
    # The realised rate on the 200 fresh queries, counted with NumPy: the
    # non-matching items returned over all non-matching (query, item) pairs.
    returned = found.ids >= 0
    false = np.sum(returned & (found.labels != qlabels[:, None]))
    non_matching = sum(600 - np.sum(labels == l) for l in qlabels)
    assert 0 < false / non_matching <= 0.05 * 1.2, false / non_matching
    # A stricter rate returns fewer.
    strict = db.search("c", mean=qmean, var=qvar, max_false_match_rate=0.01, max_results=600)
    assert np.sum(strict.ids >= 0) < np.sum(returned)
    # Python refuses what the CLI refuses.
    for bad in (0.0 - 1.0, 1.0, 2.0):
        with pytest.raises(hedgedb.InvalidArgumentError, match=r"false-match rate must be in \(0, 1\)"):
            db.search("c", mean=qmean, var=qvar, max_false_match_rate=bad)
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"confidence must be in \(0, 1\)"):
        db.search("c", mean=qmean, var=qvar, max_false_match_rate=0.05, confidence=1.0)
    with pytest.raises(hedgedb.InvalidArgumentError, match="excludes min-prob"):
        db.search("c", mean=qmean, var=qvar, max_false_match_rate=0.05, min_prob=0.5)
    with pytest.raises(hedgedb.InvalidArgumentError, match="held-out non-matching pairs"):
        db.search("c", mean=qmean, var=qvar, max_false_match_rate=1e-7)


def test_calibrate_refuses_bad_input(db, data):
    (mean, var, labels), (qmean, qvar, qlabels) = data
    db.create_collection("c", "gaussian", 8)
    db.ingest("c", mean=mean, var=var, labels=labels)
    with pytest.raises(hedgedb.InvalidArgumentError, match="query_labels"):
        db.calibrate("c", mean=qmean, var=qvar)
    with pytest.raises(hedgedb.InvalidArgumentError, match="query_labels"):
        db.calibrate("c", query_labels=qlabels)
    with pytest.raises(hedgedb.InvalidArgumentError, match="query_labels: expected shape"):
        db.calibrate("c", mean=qmean, var=qvar, query_labels=qlabels[:5])
    with pytest.raises(hedgedb.InvalidArgumentError, match="max_pairs"):
        db.calibrate("c", max_pairs=0)
    with pytest.raises(hedgedb.InvalidArgumentError, match="top_ranks"):
        db.calibrate("c", top_ranks=-1)
    with pytest.raises(hedgedb.InvalidArgumentError, match="unknown score"):
        db.calibrate("c", score="nope")
    with pytest.raises(hedgedb.InvalidArgumentError, match="held-out"):
        db.calibrate("c", var=qvar)
    # No labels; one class.
    db.create_collection("bare", "gaussian", 8)
    db.ingest("bare", mean=mean, var=var)
    with pytest.raises(hedgedb.InvalidArgumentError, match="labelled items"):
        db.calibrate("bare")
    db.create_collection("one", "gaussian", 8)
    db.ingest("one", mean=mean, var=var, labels=np.zeros(600, np.int64))
    with pytest.raises(hedgedb.InvalidArgumentError, match="same label"):
        db.calibrate("one")
    for name in ("c", "bare", "one"):
        assert db.stats(name)["calibrations"] == []
