"""hedgedb.dask: one collection over shards on a Dask LocalCluster (worker
processes). The merged top-k equals a single-node collection's, score for
score; a worker that dies makes the search raise, never return short."""

import os
import pathlib
import signal
import subprocess

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")
distributed = pytest.importorskip("distributed")
from hedgedb.dask import ShardedCollection  # noqa: E402

SOURCE = pathlib.Path(__file__).resolve().parents[2]


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
        # Every later call raises hedgedb.Error too (Dask itself raises a
        # bare ValueError once it knows the actor is lost), naming why.
        for call in (sharded.count, sharded.flush,
                     lambda: sharded.search(mean=mean[:5], var=var[:5], k=5),
                     lambda: sharded.ingest(ids=[1000], mean=mean[:1], var=var[:1])):
            with pytest.raises(hedgedb.Error, match="shard 1"):
                call()
        sharded.close()  # nothing left to close: no error
        # The surviving shard was closed when shard 1 was lost: the
        # collection opens again at once, every item there.
        c.wait_for_workers(2, timeout=120)
        again = ShardedCollection.create(c, str(tmp_path / "s"), "c", shards=2, **SPEC)
        assert again.count() == 400
        again.close()
    cluster.close()


def test_reshard_keeps_each_items_label_and_can_be_retried(client, tmp_path):
    """Items with and without labels in one shard keep theirs through a
    reshard; a reshard into a root that an interrupted one left half
    written completes."""
    mean, var, _ = data(300)
    ids = np.arange(300, dtype=np.int64)
    labels = [int(i % 5) if i % 3 else None for i in ids]  # a third have no label
    sharded = ShardedCollection.create(client, str(tmp_path / "two"), "c", shards=2, **SPEC)
    sharded.ingest(ids=ids[:150], mean=mean[:150], var=var[:150], labels=labels[:150])
    sharded.ingest(ids=ids[150:], mean=mean[150:], var=var[150:])  # no labels at all
    expected = {int(i): (labels[i] if i < 150 else None) for i in ids}
    passing = {i: sum(1 for v in expected.values() if v == i) for i in range(5)}

    def check(collection):
        assert collection.count() == 300
        for label in (3, 0):
            r = collection.search(mean=mean[:1], var=var[:1], k=5, exhaustive=True,
                                  labels_in=[label])
            assert r["passing"][0] == passing[label]

    check(sharded)
    # An interrupted reshard: part of the items already in the new shards.
    partial = ShardedCollection.create(client, str(tmp_path / "three"), "c", shards=3, **SPEC)
    partial.ingest(ids=ids[:40], mean=mean[:40], var=var[:40], labels=[7] * 40)
    partial.close()
    three = sharded.reshard(str(tmp_path / "three"), shards=3)
    check(three)
    three.close()
    sharded.close()
    got = {}
    for s in range(3):
        with hedgedb.open(str(tmp_path / "three" / f"shard-{s}")) as db:
            for r in db.get("c", db.list_ids("c")):
                got[r["id"]] = r["label"]
                np.testing.assert_array_equal(r["mean"], mean[r["id"]])
    assert got == expected


def test_threshold_search_merges_every_qualifying_item(client, tmp_path):
    """min_prob: every shard's qualifying items, merged (before the fix the
    merge cut them to the default k = 10)."""
    binary = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))
    rng = np.random.default_rng(3)
    n = 2000
    labels = rng.integers(0, 4, size=n)  # 4 tight clusters: many pairs match
    mean = (labels[:, None] * 3.0 + rng.normal(scale=0.3, size=(n, 8))).astype(np.float32)
    var = np.full((n, 8), 0.05, np.float32)
    root = str(tmp_path / "s")
    sharded = ShardedCollection.create(client, root, "c", shards=2, **SPEC)
    sharded.ingest(ids=np.arange(n), mean=mean, var=var, labels=labels)
    sharded.close()
    for i in range(2):  # each shard's own calibration
        r = subprocess.run([binary, "calibrate", "--db", os.path.join(root, f"shard-{i}"),
                            "--collection", "c"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    # The expected answer: each shard's own threshold search, united.
    expected = []
    for q in range(3):
        found = {}
        for i in range(2):
            with hedgedb.open(os.path.join(root, f"shard-{i}")) as db:
                res = db.search("c", mean=mean[q:q + 1], var=var[q:q + 1], min_prob=0.05,
                                exhaustive=True, max_results=5000)
                for j in range(res.ids.shape[1]):
                    if res.ids[0, j] >= 0:
                        found[int(res.ids[0, j])] = float(res.scores[0, j])
        expected.append(found)
    assert min(len(f) for f in expected) > 100  # far more than k
    sharded = ShardedCollection.create(client, root, "c", shards=2, **SPEC)
    merged = sharded.search(mean=mean[:3], var=var[:3], min_prob=0.05, exhaustive=True,
                            max_results=5000)
    for q in range(3):
        got = {int(i): float(s) for i, s in zip(merged["ids"][q], merged["scores"][q]) if i >= 0}
        assert got == expected[q]
        valid = merged["scores"][q][merged["ids"][q] >= 0]
        assert np.all(np.diff(valid) <= 0)  # best first
    # max_results cuts the merged answer.
    capped = sharded.search(mean=mean[:1], var=var[:1], min_prob=0.05, exhaustive=True,
                            max_results=50)
    assert (capped["ids"][0] >= 0).sum() == 50
    sharded.close()
