"""hedgedb.dask: one collection over shards on a Dask LocalCluster (worker
processes). The merged top-k equals a single-node collection's, score for
score; a worker that dies makes the search raise, never return short."""

import os
import signal

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")
distributed = pytest.importorskip("distributed")
from hedgedb.dask import ShardedCollection  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=40)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def data(n=3000, d=8, seed=0):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=(n, d)).astype(np.float32)
    var = rng.uniform(0.05, 0.5, size=(n, d)).astype(np.float32)
    return mean, var, rng.integers(0, 30, size=n)


SPEC = dict(kind="gaussian", dim=8, index="Flat", seed=7)


def test_merged_top_k_equals_a_single_node(client, tmp_path):
    mean, var, labels = data()
    ids = np.arange(3000, dtype=np.int64) * 3 + 1  # sparse ids, spread over the shards
    sharded = ShardedCollection.create(client, str(tmp_path / "sharded"), "c", shards=2, **SPEC)
    written = sharded.ingest(ids=ids, mean=mean, var=var, labels=labels, token="b1")
    np.testing.assert_array_equal(written, ids)
    assert sharded.count() == 3000
    # A retry with the token writes nothing twice.
    again = sharded.ingest(ids=ids, mean=mean, var=var, labels=labels, token="b1")
    np.testing.assert_array_equal(again, ids)
    assert sharded.count() == 3000
    with hedgedb.open(str(tmp_path / "single")) as db:
        db.create_collection("c", **SPEC)
        db.ingest("c", ids=ids, mean=mean, var=var, labels=labels)
        for options in (dict(exhaustive=True), dict(score="mls", exhaustive=True)):
            single = db.search("c", mean=mean[:25], var=var[:25], k=10, **options)
            merged = sharded.search(mean=mean[:25], var=var[:25], k=10, **options)
            np.testing.assert_array_equal(merged["ids"], single.ids)
            np.testing.assert_array_equal(merged["scores"], single.scores)  # bitwise
            np.testing.assert_array_equal(merged["labels"], single.labels)
            np.testing.assert_array_equal(merged["uncertainties"], single.uncertainties)
            np.testing.assert_array_equal(merged["query_uncertainty"], single.query_uncertainty)
        # Two-stage: every shard's candidates include the global candidates
        # that it holds, so the merged answer is at least as good, rank by rank.
        single = db.search("c", mean=mean[:25], var=var[:25], k=10, candidates=40)
        merged = sharded.search(mean=mean[:25], var=var[:25], k=10, candidates=40)
        assert np.all(merged["scores"] >= single.scores)
        # Filters apply on every shard; "passing" sums the shards' counts.
        single = db.search("c", mean=mean[:5], var=var[:5], k=10, exhaustive=True,
                           labels_in=[3, 4])
        merged = sharded.search(mean=mean[:5], var=var[:5], k=10, exhaustive=True,
                                labels_in=[3, 4])
        np.testing.assert_array_equal(merged["ids"], single.ids)
        np.testing.assert_array_equal(merged["passing"], single.passing)
        assert set(merged["labels"].ravel()) <= {3, 4}
        # Upsert routes each id to the shard that holds it.
        sharded.ingest(ids=ids[:4], mean=mean[4:8], var=var[4:8], labels=[99] * 4, upsert=True)
        assert sharded.count() == 3000
        merged = sharded.search(mean=mean[4:5], var=var[4:5], k=10, exhaustive=True,
                                labels_in=[99])
        assert merged["passing"][0] == 4 and ids[0] in merged["ids"][0]
        db.ingest("c", ids=ids[:4], mean=mean[4:8], var=var[4:8], labels=[99] * 4, upsert=True)
        # Resharding to 3 keeps every item and the same answers.
        three = sharded.reshard(str(tmp_path / "three"), shards=3)
        assert three.count() == 3000
        single = db.search("c", mean=mean[:10], var=var[:10], k=10, exhaustive=True)
        merged = three.search(mean=mean[:10], var=var[:10], k=10, exhaustive=True)
        np.testing.assert_array_equal(merged["ids"], single.ids)
        np.testing.assert_array_equal(merged["scores"], single.scores)
        three.close()
    sharded.close()


def test_a_dead_worker_fails_the_search(tmp_path):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=50)
    with distributed.Client(cluster) as c:
        workers = sorted(c.scheduler_info()["workers"])
        sharded = ShardedCollection.create(c, str(tmp_path / "s"), "c", shards=2,
                                           workers=workers, **SPEC)
        mean, var, labels = data(400)
        sharded.ingest(ids=np.arange(400), mean=mean, var=var, labels=labels)
        sharded.timeout = 60
        pids = c.run(os.getpid)
        os.kill(pids[workers[1]], signal.SIGKILL)  # shard 1's worker
        with pytest.raises(hedgedb.Error, match="shard 1"):
            sharded.search(mean=mean[:5], var=var[:5], k=5)
    cluster.close()
