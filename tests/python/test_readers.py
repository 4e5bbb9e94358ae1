"""hedgedb.open(path, read_only=True) beside a writer in another process, and
DB.catch_up()."""

import subprocess
import sys

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")

# The writer: holds the database open, ingests 10 points per line read
# ("remove" removes ids 0..9), answers each line with "ok", exits at EOF.
WRITER = r"""
import sys
import numpy as np
import hedgedb
db = hedgedb.open(sys.argv[1])
print("ok", flush=True)
first = 10
for line in sys.stdin:
    if line.strip() == "remove":
        db.remove("c", np.arange(10, dtype=np.int64))
    else:
        vec = np.arange(first, first + 10, dtype=np.float32)[:, None] * np.ones(4, np.float32)
        db.ingest("c", vec=vec)
        first += 10
    print("ok", flush=True)
db.close()
"""


def points(first, n):
    return np.arange(first, first + n, dtype=np.float32)[:, None] * np.ones(4, np.float32)


def test_reader_beside_a_writer_catches_up(tmp_path):
    path = str(tmp_path / "db")
    with hedgedb.open(path) as db:
        db.create_collection("c", "point", 4)
        db.ingest("c", vec=points(0, 10))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ok"
        # A second writer is told the database is locked, and what to do.
        with pytest.raises(hedgedb.Error, match="is locked by another process.*read-only"):
            hedgedb.open(path)
        with hedgedb.open(path, read_only=True) as reader:
            assert reader.stats("c")["items"] == 10
            writer.stdin.write("ingest\n")
            writer.stdin.flush()
            assert writer.stdout.readline().strip() == "ok"
            assert reader.stats("c")["items"] == 10  # a snapshot until catch_up
            reader.catch_up()
            assert reader.stats("c")["items"] == 20
            assert list(reader.list_ids("c")) == list(range(20))
            hits = reader.search("c", vec=points(15, 1), k=1)
            assert hits.ids[0][0] == 15
            writer.stdin.write("remove\n")
            writer.stdin.flush()
            assert writer.stdout.readline().strip() == "ok"
            reader.catch_up()
            assert list(reader.list_ids("c")) == list(range(10, 20))
            with pytest.raises(hedgedb.Error, match="is open read-only"):
                reader.ingest("c", vec=points(100, 1))
            with pytest.raises(hedgedb.Error, match="is open read-only"):
                reader.remove("c", [12])
            with pytest.raises(hedgedb.Error, match="is open read-only"):
                reader.flush()
    finally:
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0


# One writer process: opens the database, upserts ids 0..9 with label
# `round` and payload {"round": round}, closes.
UPSERT = r"""
import sys
import numpy as np
import hedgedb
r = int(sys.argv[2])
with hedgedb.open(sys.argv[1]) as db:
    db.ingest("c", ids=np.arange(10), labels=np.full(10, r), upsert=True,
              vec=np.arange(10, dtype=np.float32)[:, None] * np.ones(4, np.float32) + r,
              payloads=['{"round": %d}' % r] * 10)
"""


RESTART = r"""
import sys
import hedgedb
hedgedb.open(sys.argv[1]).close()
"""


def test_long_lived_reader_sees_upserted_payloads_after_writer_restarts(tmp_path):
    # The writer's next open writes the previous writer's log into a table
    # and deletes the log; the reader catches up across that. Its payloads
    # (get, search with_payload) must be those of its view, as its labels
    # and the payload filter are.
    path = str(tmp_path / "db")
    with hedgedb.open(path) as db:
        db.create_collection("c", "point", 4)
    subprocess.run([sys.executable, "-c", UPSERT, path, "1"], check=True)
    with hedgedb.open(path, read_only=True) as reader:
        assert [r["payload"] for r in reader.get("c", [3])] == [b'{"round": 1}']
        for r in (2, 3, 4):
            subprocess.run([sys.executable, "-c", UPSERT, path, str(r)], check=True)
            # The writer restarts: its open writes the upsert's log into a
            # table, so the new payloads are in a table only, the old ones
            # in the log the reader read.
            subprocess.run([sys.executable, "-c", RESTART, path], check=True)
            reader.catch_up()
            want = ('{"round": %d}' % r).encode()
            got = reader.get("c", np.arange(10))
            assert [g["label"] for g in got] == [r] * 10
            assert [g["payload"] for g in got] == [want] * 10
            hits = reader.search("c", vec=points(3 + r, 1), k=10, with_payload=True)
            assert sorted(hits.ids[0]) == list(range(10))
            assert hits.payloads[0] == [want] * 10
            passing = reader.search("c", vec=points(3, 1), k=10, payload_equals={"round": r})
            assert passing.passing[0] == 10
