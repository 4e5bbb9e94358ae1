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
include every single-node candidate that it holds when `candidates` is
given: the merged answer is then at least as good at every rank. (Left at 0,
each shard asks for the count fitted with its own index, stats'
index_candidates, as a single node does with its own.) A shard that
fails (its worker died, its database refused) makes the whole call raise
hedgedb.Error naming the shard: never a silently short answer. A shard that
is lost (not a refusal: a dead worker, a lost actor, no answer in time) also
closes the other shards, so that ShardedCollection.create can open the
directories again at once; the lost object then refuses every call.

Adding shards changes `id % shards` for most ids, so it is a rebuild:
`reshard` reads every item back and writes it into a new set of shards,
replacing what an interrupted earlier reshard wrote (docs/python.md, "Dask").
"""

import os

import numpy as np

from . import Error
from . import open as open_db
from ._hedgedb import _as_int64

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


class _Lost(Error):
    """A shard that did not answer (not a refusal by its database)."""


def _failure(shard, what, e):
    return _Lost(f"shard {shard}: {what} failed ({type(e).__name__}: {e}); "
                 "no partial result is returned")


def _result(future, shard, what, timeout=None):
    """The value of an actor call; any failure (or no answer within
    `timeout` seconds) is a hedgedb.Error naming the shard."""
    try:
        return future.result(timeout=timeout)
    except Error:
        raise
    except Exception as e:  # a dead worker, a lost actor, a comm error
        raise _failure(shard, what, e) from e


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
        self._lost = None  # why the shards were closed after a shard was lost
        self._lost_error = None  # the hedgedb.Error that said so

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
        actors, failure = [], None
        for i, f in enumerate(futures):
            try:
                actors.append(_result(f, i, "opening"))
            except Error as e:
                failure = failure or e
        if failure is not None:
            # The shards that opened hold their directories: close them, so
            # that a retry can open every one.
            cls(client, root, spec, actors)._close_quietly()
            raise failure
        return cls(client, root, spec, actors)

    def _call(self, shard, what, method, *args):
        """Starts actors[shard].method(*args); the future, or a hedgedb.Error
        naming the shard when the call cannot even start (its actor's worker
        is gone: Dask raises at once)."""
        if self._lost is not None:
            raise Error(f"collection '{self.name}' under {self.root} was closed: {self._lost}; "
                        "open it again with ShardedCollection.create")
        try:
            return getattr(self.actors[shard], method)(*args)
        except Error:
            raise
        except Exception as e:
            self._abandon(_failure(shard, what, e))
            raise self._lost_error from e

    def _wait(self, calls, what, timeout=None):
        """The results of [(shard, future)], in order; the first failure
        raises (a lost shard closes the others first)."""
        out = []
        for s, f in calls:
            try:
                out.append(_result(f, s, what, timeout))
            except _Lost as e:
                self._abandon(e)
                raise
        return out

    def _abandon(self, error):
        """A shard is lost: close the others (their worker processes keep
        their databases open otherwise, and a reopen would find them
        locked) and refuse further calls."""
        if self._lost is None:
            self._lost = str(error)
            self._lost_error = error
            self._close_quietly()

    def _close_quietly(self):
        calls = []
        for a in self.actors:
            try:
                calls.append(a.close())
            except Exception:  # its worker is gone: so is its database
                pass
        for f in calls:
            try:
                f.result(timeout=60)
            except Exception:
                pass

    @property
    def shards(self):
        return len(self.actors)

    def ingest(self, *, ids, labels=None, payloads=None, token="", upsert=False, **arrays):
        """Routes item i to shard ids[i] % shards; one atomic batch per shard
        (a failure names the shard; the others' batches are written). With a
        token, retrying the whole call after a failure writes only what is
        missing: each shard's part carries the token and its shard number.
        upsert=True replaces existing ids (an id always lives on one shard)."""
        # The rule every ingest reads ids by: a fraction or a value out of
        # int64's range is refused here, before it picks a shard.
        ids = _as_int64(ids, "ids")
        if ids.ndim != 1:
            raise Error("ids: expected a 1-D array")
        if labels is not None:
            # Integers, or None for an item without a label (object array).
            labels = np.asarray(labels)
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
                part["labels"] = labels[rows]
                if labels.dtype == object:
                    part["labels"] = list(part["labels"])
            if payloads is not None:
                part["payloads"] = [payloads[r] for r in rows]
            if token:
                part["token"] = f"{token}#shard-{s}"
            if upsert:
                part["upsert"] = True
            calls.append((s, self._call(s, "ingest", "ingest", self.name, part)))
        written = self._wait(calls, "ingest", self.timeout)
        return np.sort(np.concatenate(written)) if written else np.zeros(0, np.int64)

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
        calls = [(s, self._call(s, "search", "search", self.name, queries, options))
                 for s in range(self.shards)]
        parts = self._wait(calls, "search", self.timeout)
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
        calls = [(s, self._call(s, "count", "count", self.name)) for s in range(self.shards)]
        return sum(self._wait(calls, "count", self.timeout))

    def flush(self):
        calls = [(s, self._call(s, "flush", "flush")) for s in range(self.shards)]
        self._wait(calls, "flush", self.timeout)

    def reshard(self, root, shards, workers=None):
        """A new ShardedCollection under `root` with `shards` shards holding
        every item of this one (read back with get, re-routed by id), each
        with its own label (or none) and payload. The items are written as
        upserts: a reshard that was interrupted (a worker died) is retried
        by calling reshard again with the same root, which replaces what the
        first attempt wrote."""
        target = ShardedCollection.create(self.client, root, self.name, shards=shards,
                                          workers=workers,
                                          **{k: v for k, v in self.spec.items() if k != "name"})
        for s in range(self.shards):
            ids, records = self._wait([(s, self._call(s, "read", "read_all", self.name))],
                                      "read", self.timeout)[0]
            if len(ids) == 0:
                continue
            arrays = {}
            for name in _VECTORS:
                if name in records[0]:
                    arrays[name] = np.stack([r[name] for r in records])
            _reshape(self.spec, arrays)
            # Per item: a label, or None for an item that has none.
            labels = [r["label"] for r in records]
            target.ingest(ids=ids, payloads=[r["payload"] for r in records], labels=labels,
                          upsert=True, **arrays)
        return target

    def close(self):
        if self._lost is not None:
            return  # closed when the shard was lost
        calls = [(s, self._call(s, "close", "close")) for s in range(self.shards)]
        self._wait(calls, "close", self.timeout)


def _reshape(spec, arrays):
    """get() returns flat vectors; mixtures need (n, C, D)."""
    if spec.get("kind") == "mog":
        c = spec.get("components", 1)
        for name in ("mean", "var"):
            if name in arrays:
                arrays[name] = arrays[name].reshape(len(arrays[name]), c, -1)
