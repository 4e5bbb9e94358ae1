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
