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
