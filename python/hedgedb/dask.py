"""One logical hedgedb collection spread over the workers of a Dask cluster.

    from dask.distributed import Client, LocalCluster
    from hedgedb.dask import ShardedCollection

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    sharded = ShardedCollection.create(client, "/data/faces", "faces", kind="gaussian", dim=64,
                                       shards=2)
    sharded.ingest(ids=ids, mean=mean, var=var, labels=labels)
    res = sharded.search(mean=q_mean, var=q_var, k=10)    # the exact global top-k

Each shard is a hedgedb database directory ROOT/shard-<i> opened by one
Dask actor on one worker (a database admits one process). Ingest routes
every item to shard `id % shards`, so ids must be given. A search asks every
shard for its top k and merges them: the scores are exact and every shard
has the collection's spec (its seed, hence its Monte Carlo sample bank), so
with exhaustive=True the merged top k is the single-node top k, score for
score. In a two-stage search each shard draws its own candidates, which
include every single-node candidate that it holds: the merged answer is then
at least as good at every rank. A shard that
fails (its worker died, its database refused) makes the whole call raise
hedgedb.Error naming the shard: never a silently short answer.

Adding shards changes `id % shards` for most ids, so it is a rebuild:
`reshard` reads every item back and writes it into a new set of shards
(docs/python.md, "Dask").
"""

import os

import numpy as np

from . import Error
from . import open as open_db

_VECTORS = ("vec", "mean", "var", "weights", "codes")


class _Shard:
    """A Dask actor: one hedgedb database on one worker."""

    def __init__(self, path, spec):
        self.path = path
        self.db = open_db(path)
        if spec["name"] not in self.db.list_collections():
            self.db.create_collection(**spec)

    def ingest(self, collection, arrays):
        return self.db.ingest(collection, **arrays)

    def search(self, collection, queries, options):
        r = self.db.search(collection, **queries, **options)
        return dict(ids=r.ids, scores=r.scores, probs=r.probs, uncertainties=r.uncertainties,
                    labels=r.labels, query_uncertainty=r.query_uncertainty, passing=r.passing)

    def read_all(self, collection):
        ids = self.db.list_ids(collection)
        return ids, self.db.get(collection, ids)

    def count(self, collection):
        return self.db.stats(collection)["items"]

    def flush(self):
        self.db.flush()

    def close(self):
        self.db.close()


def _result(future, shard, what, timeout=None):
    """The value of an actor call; any failure (or no answer within
    `timeout` seconds) is a hedgedb.Error naming the shard."""
    try:
        return future.result(timeout=timeout)
    except Error:
        raise
    except Exception as e:  # a dead worker, a lost actor, a comm error
        raise Error(f"shard {shard}: {what} failed ({type(e).__name__}: {e}); "
                    "no partial result is returned") from e


class ShardedCollection:
    """A collection over `shards` hedgedb databases, one actor each."""

    # Seconds an actor call may take before the shard counts as failed.
    timeout = 600

    def __init__(self, client, root, spec, actors):
        self.client = client
        self.root = root
        self.spec = spec
        self.name = spec["name"]
        self.actors = actors

    @classmethod
    def create(cls, client, root, name, *, shards, workers=None, **spec):
        """Opens (creating if needed) ROOT/shard-<i> for i < shards, one actor
        per shard, placed round-robin on `workers` (default: all workers)."""
        if shards < 1:
            raise Error("shards must be >= 1")
        workers = workers or sorted(client.scheduler_info()["workers"])
        spec = dict(spec, name=name)
        os.makedirs(root, exist_ok=True)
        futures = [
            client.submit(_Shard, os.path.join(root, f"shard-{i}"), spec, actor=True,
                          workers=[workers[i % len(workers)]], pure=False)
            for i in range(shards)
        ]
        actors = [_result(f, i, "opening") for i, f in enumerate(futures)]
        return cls(client, root, spec, actors)

    @property
    def shards(self):
        return len(self.actors)

    def ingest(self, *, ids, labels=None, payloads=None, token="", upsert=False, **arrays):
        """Routes item i to shard ids[i] % shards; one atomic batch per shard
        (a failure names the shard; the others' batches are written). With a
        token, retrying the whole call after a failure writes only what is
        missing: each shard's part carries the token and its shard number.
        upsert=True replaces existing ids (an id always lives on one shard)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1:
            raise Error("ids: expected a 1-D array")
        shard_of = ids % self.shards
        calls = []
        for s in range(self.shards):
            rows = np.nonzero(shard_of == s)[0]
            if rows.size == 0:
                continue
            part = {k: np.ascontiguousarray(np.asarray(v)[rows]) for k, v in arrays.items()
                    if v is not None}
            part["ids"] = ids[rows]
            if labels is not None:
                part["labels"] = np.asarray(labels, dtype=np.int64)[rows]
            if payloads is not None:
                part["payloads"] = [payloads[r] for r in rows]
            if token:
                part["token"] = f"{token}#shard-{s}"
            if upsert:
                part["upsert"] = True
            calls.append((s, self.actors[s].ingest(self.name, part)))
        return np.sort(np.concatenate([_result(f, s, "ingest", self.timeout) for s, f in calls]))

    def search(self, *, k=10, **kwargs):
        """The exact global top k of each query: every shard's top k, merged
        by score (best first; equal scores by id). Filters (labels_in,
        labels_not_in, payload_equals) apply on every shard; "passing" sums
        the shards' counts. With min_prob > 0 (each shard's own calibration)
        the answer is every shard's qualifying items, merged and cut to
        max_results (default 1000), not to k; columns past the longest
        answer are dropped."""
        queries = {key: kwargs.pop(key) for key in ("vec", "mean", "var", "weights", "logp")
                   if kwargs.get(key) is not None}
        options = dict(kwargs, k=k)
        calls = [self.actors[s].search(self.name, queries, options) for s in range(self.shards)]
        parts = [_result(f, s, "search", self.timeout) for s, f in enumerate(calls)]
        ids = np.concatenate([p["ids"] for p in parts], axis=1)
        scores = np.concatenate([p["scores"] for p in parts], axis=1)
        # Padding (id -1, NaN) sorts last; then score descending, id ascending.
        key_score = np.where(ids < 0, -np.inf, scores.astype(np.float64))
        key_id = np.where(ids < 0, np.iinfo(np.int64).max, ids)
        # A threshold search answers with every qualifying item (up to
        # max_results per shard), not with k.
        threshold = (kwargs.get("min_prob") or 0) > 0
        keep = kwargs.get("max_results", 1000) if threshold else k
        if threshold:
            keep = min(keep, int((ids >= 0).sum(axis=1).max(initial=0)))
        order = np.lexsort((key_id, -key_score), axis=1)[:, :keep]
        merged = {name: np.take_along_axis(np.concatenate([p[name] for p in parts], axis=1),
                                           order, axis=1)
                  for name in ("ids", "scores", "probs", "uncertainties", "labels")}
        merged["query_uncertainty"] = parts[0]["query_uncertainty"]
        passing = np.stack([p["passing"] for p in parts])
        merged["passing"] = np.where((passing < 0).any(axis=0), -1, passing.sum(axis=0))
        return merged

    def count(self):
        return sum(_result(self.actors[s].count(self.name), s, "count")
                   for s in range(self.shards))

    def flush(self):
        for s, f in enumerate([a.flush() for a in self.actors]):
            _result(f, s, "flush")

    def reshard(self, root, shards, workers=None):
        """A new ShardedCollection under `root` with `shards` shards holding
        every item of this one (read back with get, re-routed by id)."""
        target = ShardedCollection.create(self.client, root, self.name, shards=shards,
                                          workers=workers,
                                          **{k: v for k, v in self.spec.items() if k != "name"})
        for s in range(self.shards):
            ids, records = _result(self.actors[s].read_all(self.name), s, "read")
            if len(ids) == 0:
                continue
            arrays = {}
            for name in _VECTORS:
                if name in records[0]:
                    arrays[name] = np.stack([r[name] for r in records])
            _reshape(self.spec, arrays)
            labels = [r["label"] for r in records]
            target.ingest(ids=ids, payloads=[r["payload"] for r in records],
                          labels=None if any(l is None for l in labels) else labels, **arrays)
        return target

    def close(self):
        for s, f in enumerate([a.close() for a in self.actors]):
            _result(f, s, "close")


def _reshape(spec, arrays):
    """get() returns flat vectors; mixtures need (n, C, D)."""
    if spec.get("kind") == "mog":
        c = spec.get("components", 1)
        for name in ("mean", "var"):
            if name in arrays:
                arrays[name] = arrays[name].reshape(len(arrays[name]), c, -1)
