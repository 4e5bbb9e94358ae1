"""Retrieval metrics of your own embeddings, without a model (docs/python.md,
"Metrics"): recall@k, MAP@R, R-precision and KNN accuracy, with the same code
as `hedgedb evaluate`.

    import numpy as np, hedgedb.metrics
    # a (queries x gallery) similarity matrix, higher = more similar
    r = hedgedb.metrics.retrieval(sim, labels)           # leave-one-out, Q == G
    r = hedgedb.metrics.retrieval(sim, gallery_labels, query_labels=q_labels)
    # embeddings, scored as a hedgedb search scores them (hedgedb.score.h)
    r = hedgedb.metrics.evaluate_embeddings("gaussian", mean=mu, var=s2, labels=labels,
                                            score="mls")
    r["recall_at_1"], r["map_at_r"], r["eta_calibration"]
    # a collection: every labelled item queries the others, with its spec
    with hedgedb.open("db") as db:
        r = hedgedb.metrics.evaluate_collection(db, "faces")

Ranking: gallery items by descending similarity, ties by ascending gallery
index. A query with no other same-label gallery item (a "lone" query) is left
out of recall@k, MAP@R and R-precision, as pytorch-metric-learning leaves it
out; "queries_with_relevant" counts the queries they average over. KNN
accuracy (majority of the knn_k nearest) is over all queries.

Needs a build with the encoders (LibTorch), whose library holds the metrics;
importing loads LibTorch.
"""

import json

import numpy as np

from . import InvalidArgumentError

try:
    from ._encoders import _evaluate_embeddings, _retrieval_from_similarity
except ImportError as e:  # a build without the encoders
    raise ImportError("hedgedb.metrics needs hedgedb built with the encoders "
                      f"(-DHEDGEDB_WITH_ENCODERS=ON): {e}") from e

__all__ = ["retrieval", "evaluate_embeddings", "evaluate_collection"]

_KINDS = ("point", "gaussian", "mog", "codes")
_ARRAYS = ("vec", "mean", "var", "std", "log_var", "log_std", "weights", "codes", "logp")


def _labels(labels, name):
    a = np.asarray(labels)
    if a.ndim != 1:
        raise InvalidArgumentError(f"{name}: expected a 1-d array, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InvalidArgumentError(f"{name}: expected integer labels, got {a.dtype}")
    return a.astype(np.int64, copy=False)


def retrieval(similarity, labels, query_labels=None, *, exclude_self=None, ks=(1, 2, 4, 8),
              knn_k=5):
    """recall@k, MAP@R, R-precision and KNN accuracy of a similarity matrix.

    similarity: (Q, G), higher = more similar. labels: the G gallery labels.
    query_labels: the Q query labels; None: the gallery's (then Q == G and
    query i is gallery item i). exclude_self: leave gallery item i out of
    query i's ranking (default: True when query_labels is None, else False).
    Returns a dict: recall_at_<k> for each k, map_at_r, r_precision,
    knn_accuracy, queries, queries_with_relevant.
    """
    gallery = _labels(labels, "labels")
    queries = gallery if query_labels is None else _labels(query_labels, "query_labels")
    if exclude_self is None:
        exclude_self = query_labels is None
    sim = np.asarray(similarity)
    if sim.ndim != 2 or sim.shape != (queries.size, gallery.size):
        raise InvalidArgumentError(
            f"similarity: expected shape (queries, gallery) = ({queries.size}, {gallery.size}), "
            f"got {sim.shape}")
    if not np.issubdtype(sim.dtype, np.number) or np.issubdtype(sim.dtype, np.complexfloating):
        raise InvalidArgumentError(f"similarity: expected real numbers, got {sim.dtype}")
    return json.loads(_retrieval_from_similarity(
        np.ascontiguousarray(sim, dtype=np.float32), queries, gallery, bool(exclude_self),
        [int(k) for k in ks], int(knn_k)))


def _batch(kind, arrays, what, queries):
    """The arrays of `kind`, checked; (dict for the engine, var form, n, dim, C, code_k)."""
    given = {k: v for k, v in arrays.items() if v is not None}
    forms = [f for f in ("var", "std", "log_var", "log_std") if f in given]
    if len(forms) > 1:
        raise InvalidArgumentError(f"{what}: give the variances once: var, std, log_var or log_std")
    if kind == "point":
        allowed, needed = {"vec"}, ["vec"]
    elif kind == "gaussian":
        allowed, needed = {"mean"} | set(forms), ["mean", "var (or std, log_var, log_std)"]
    elif kind == "mog":
        allowed, needed = {"mean", "weights"} | set(forms), ["mean", "var (or std, log_var, log_std)"]
    else:
        allowed, needed = ({"logp"}, ["logp"]) if queries else ({"codes"}, ["codes"])
    for name in given:
        if name not in allowed:
            raise InvalidArgumentError(f"{what}: {name} does not apply to {kind} embeddings")
    for name in needed:
        key = name.split()[0]
        if key == "var":
            if not forms:
                raise InvalidArgumentError(f"{what}: {kind} embeddings need {name}")
        elif key not in given:
            raise InvalidArgumentError(f"{what}: {kind} embeddings need {name}")
    out = {}
    for name, value in given.items():
        a = np.asarray(value)
        if name == "codes":
            if a.size and not np.issubdtype(a.dtype, np.integer):
                raise InvalidArgumentError(f"{what}: codes: expected integers, got {a.dtype}")
            out[name] = np.ascontiguousarray(a, dtype=np.int32)
        else:
            if not np.issubdtype(a.dtype, np.number):
                raise InvalidArgumentError(f"{what}: {name}: expected a numeric array")
            out["var" if name in forms else name] = np.ascontiguousarray(a, dtype=np.float32)
    first = out.get("vec", out.get("mean", out.get("codes", out.get("logp"))))
    ndim = {"point": 2, "gaussian": 2, "mog": 3}.get(kind, 3 if queries else 2)
    if first.ndim != ndim:
        raise InvalidArgumentError(
            f"{what}: {needed[0]} must have {ndim} dimensions, got shape {first.shape}")
    n, dim = first.shape[0], first.shape[-1]
    components = first.shape[1] if kind == "mog" else 1
    code_k = first.shape[2] if kind == "codes" and queries else 0
    if kind == "codes" and queries:
        dim = first.shape[1]
    if "var" in out and out["var"].shape != first.shape:
        raise InvalidArgumentError(
            f"{what}: {forms[0]} must have the shape of mean {first.shape}, got "
            f"{out['var'].shape}")
    if "weights" in out and out["weights"].shape != (n, components):
        raise InvalidArgumentError(
            f"{what}: weights must have shape {(n, components)}, got {out['weights'].shape}")
    return out, (forms[0] if forms else "var"), n, dim, components, code_k


def evaluate_embeddings(kind, *, labels, vec=None, mean=None, var=None, std=None, log_var=None,
                        log_std=None, weights=None, codes=None, queries=None, query_labels=None,
                        score=None, samples=0, seed=0, match_a=None, match_b=None, code_k=None,
                        ks=(1, 2, 4, 8), knn_k=5, eta_bins=20, _block_floats=None):
    """Retrieval metrics of embeddings, as `hedgedb evaluate --kind ...` reports them.

    The items (vec; mean with var/std/log_var/log_std [and weights]; codes) and
    their labels form the gallery. queries: None -- every item queries all the
    others (leave-one-out); or a dict of the queries' arrays (same names; codes
    queries: logp tables, shape (Q, d, k)) with query_labels, none left out.
    score: mc, csd, mls, l2, match, logprob (default: l2 for point, else the
    kind's search default); samples (0: the kind's default), seed, match_a,
    match_b as a collection's (gaussian and mog with neither given: both fitted
    to the items' labelled pairs, as calibrate fits a collection's; with one
    given, the other's default a = 1 or b = 0). Returns a dict: recall_at_<k>, map_at_r,
    r_precision, knn_accuracy, queries, queries_with_relevant, and for gaussian
    and mog mean_eta and eta_calibration (KNN accuracy per eta bin of the
    queries, Kendall's tau) when there are at least eta_bins queries.
    """
    if kind not in _KINDS:
        raise InvalidArgumentError(f"unknown kind {kind!r} (point, gaussian, mog or codes)")
    item_arrays = dict(vec=vec, mean=mean, var=var, std=std, log_var=log_var, log_std=log_std,
                       weights=weights, codes=codes)
    items, form, n, dim, components, _ = _batch(kind, item_arrays, "items", queries=False)
    gallery = _labels(labels, "labels")
    if gallery.size != n:
        raise InvalidArgumentError(f"labels: {gallery.size} labels for {n} items")
    query_batch, probes = None, None
    if queries is not None:
        if query_labels is None:
            raise InvalidArgumentError("query_labels are needed with queries")
        unknown = set(queries) - set(_ARRAYS)
        if unknown:
            raise InvalidArgumentError(f"queries: unknown arrays {sorted(unknown)}")
        query_batch, query_form, q, q_dim, q_components, q_code_k = _batch(
            kind, dict(queries), "queries", queries=True)
        if kind == "codes":
            code_k = q_code_k
        if query_form != form and kind in ("gaussian", "mog"):
            raise InvalidArgumentError(
                f"queries give the variances as {query_form}, the items as {form}: use one form")
        if q_dim != dim or q_components != components:
            raise InvalidArgumentError(
                f"queries have dim {q_dim} (components {q_components}), the items dim {dim} "
                f"(components {components})")
        probes = _labels(query_labels, "query_labels")
        if probes.size != q:
            raise InvalidArgumentError(f"query_labels: {probes.size} labels for {q} queries")
    elif query_labels is not None:
        raise InvalidArgumentError("query_labels need queries")
    elif kind == "codes":
        raise InvalidArgumentError(
            "codes are queried with log-probability tables: pass queries={'logp': ...} and "
            "query_labels")
    if score is None:
        score = "l2" if kind == "point" else "default"
    fit = match_a is None and match_b is None
    report = json.loads(_evaluate_embeddings(
        kind, int(dim), int(components), int(code_k or 0),
        1.0 if match_a is None else float(match_a), 0.0 if match_b is None else float(match_b),
        items, gallery, query_batch, probes, form, str(score), int(samples), int(seed),
        [int(k) for k in ks], int(knn_k), int(eta_bins), fit,
        *([] if _block_floats is None else [int(_block_floats)])))
    return report


def evaluate_collection(db, collection, *, score=None, samples=None, seed=None, ks=(1, 2, 4, 8),
                        knn_k=5, eta_bins=20, chunk=4096):
    """evaluate_embeddings of a collection's labelled items, each querying the
    others, scored with the collection's spec (match_a, match_b; samples and
    seed unless given) -- what `hedgedb evaluate --db DB --collection C`
    prints. Unlabelled items are skipped and counted in
    "unlabelled_items_skipped". Codes collections are refused: their queries
    are log-probability tables the collection does not store."""
    spec = db.describe(collection)
    kind = spec["kind"]
    if kind == "codes":
        raise InvalidArgumentError(
            f"collection {collection!r} holds codes, whose queries are log-probability tables "
            "the collection does not store: use evaluate_embeddings with codes and "
            "queries={'logp': ...}")
    ids = np.asarray(db.list_ids(collection), dtype=np.int64)
    fields = {"point": ["vec"], "gaussian": ["mean", "var"], "mog": ["mean", "var", "weights"]}[kind]
    rows = {f: [] for f in fields}
    labels, unlabelled = [], 0
    for begin in range(0, ids.size, chunk):
        for record in db.get(collection, ids[begin:begin + chunk]):
            if not record["found"]:  # removed meanwhile
                continue
            if record["label"] is None:
                unlabelled += 1
                continue
            labels.append(record["label"])
            for f in fields:
                rows[f].append(record[f])
    if len(labels) < 2:
        raise InvalidArgumentError(f"collection {collection!r} has {len(labels)} labelled items: "
                                   "evaluation needs at least 2")
    shape = (spec["components"], spec["dim"]) if kind == "mog" else (spec["dim"],)
    arrays = {f: np.stack(rows[f]).reshape((len(labels),) + (shape if f != "weights" else
                                                               (spec["components"],)))
              for f in fields}
    report = evaluate_embeddings(
        kind, labels=np.asarray(labels, dtype=np.int64), **arrays, score=score,
        samples=spec["samples"] if samples is None else samples,
        seed=spec["seed"] if seed is None else seed, match_a=spec["match_a"],
        match_b=spec["match_b"], ks=ks, knn_k=knn_k, eta_bins=eta_bins)
    report["collection"] = collection
    report["unlabelled_items_skipped"] = unlabelled
    return report
