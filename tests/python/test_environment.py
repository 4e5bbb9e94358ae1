"""The tests do not leak environment variables into each other: a module that
changes os.environ (as Dask's LocalCluster does with OMP_NUM_THREADS) leaves
the next module, and the subprocesses it starts, the session's environment.
Runs an inner pytest session with this directory's conftest.py."""

import pathlib

pytest_plugins = "pytester"

CONFTEST = pathlib.Path(__file__).with_name("conftest.py")


def test_a_module_that_changes_the_environment_leaks_nothing(pytester, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("HEDGEDB_LEAK_PROBE", raising=False)
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(
        test_a_changes="""
import os
import pytest

@pytest.fixture(scope="module")
def cluster():
    os.environ["OMP_NUM_THREADS"] = "1"  # as Dask's LocalCluster does
    yield

def test_one(cluster):
    os.environ["HEDGEDB_LEAK_PROBE"] = "x"
    assert os.environ["OMP_NUM_THREADS"] == "1"

def test_two(cluster):
    assert "HEDGEDB_LEAK_PROBE" not in os.environ
    assert os.environ["OMP_NUM_THREADS"] == "1"
""",
        test_b_reads="""
import os
import subprocess
import sys

def test_clean():
    assert "OMP_NUM_THREADS" not in os.environ
    child = subprocess.run([sys.executable, "-c",
                            "import os; print(os.environ.get('OMP_NUM_THREADS'))"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "None"
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_a_changes.py",
                                           "test_b_reads.py")
    result.assert_outcomes(passed=3)
