"""hedgedb: a vector database for uncertain embeddings.

    import numpy as np, hedgedb
    with hedgedb.open("db") as db:
        db.create_collection("faces", kind="gaussian", dim=16)
        db.ingest("faces", mean=mean, var=var, labels=labels)
        res = db.search("faces", mean=q_mean, var=q_var, k=10)
        res.ids, res.scores, res.probs, res.uncertainties, res.query_uncertainty
    # several photos of one subject -> one Gaussian template
    t_mean, t_var = hedgedb.fuse_gaussians(photo_means, photo_vars)
    # pairwise scores without a database, as a search scores them
    s = hedgedb.score_matrix("gaussian", {"mean": q_mean, "var": q_var},
                             {"mean": mean, "var": var}, score="mls")

Arrays that are C-contiguous float32 (int32 codes, int64 ids and labels) are
used where they lie, without a copy; others are converted once. The GIL is
released while the engine works. Errors raise hedgedb.Error with the engine's
message (NotFoundError, InvalidArgumentError for those cases). See
docs/python.md.
"""

from ._hedgedb import (  # noqa: F401
    DB,
    Error,
    InvalidArgumentError,
    MatchParametersWarning,
    NotFoundError,
    SearchResults,
    _conversions,
    fuse_gaussians,
    open,
    score_matrix,
)

__all__ = [
    "DB",
    "Error",
    "InvalidArgumentError",
    "MatchParametersWarning",
    "NotFoundError",
    "SearchResults",
    "fuse_gaussians",
    "open",
    "score_matrix",
]
