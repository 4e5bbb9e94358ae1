"""Makes the build tree's Python package importable: HEDGEDB_PYTHON_DIR (set
by CTest), else build/python beside the sources. Keeps the tests from leaking
environment variables into each other (see restore_environment)."""

import os
import pathlib
import sys

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("HEDGEDB_PYTHON_DIR", str(SOURCE / "build" / "python")))
# Dask workers are other processes: they find the package through the
# environment.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [sys.path[0]] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

# The environment every test starts from. Some libraries change os.environ of
# the test process for good: Dask's LocalCluster sets OMP_NUM_THREADS,
# MKL_NUM_THREADS and OPENBLAS_NUM_THREADS to 1 so that its workers inherit
# them. A later test's `hedgedb` subprocess would inherit them too and compute
# with other thread counts than the test process does.
SESSION_ENVIRONMENT = dict(os.environ)


def _restore(environment):
    """Makes os.environ equal `environment` again, except pytest's own
    PYTEST_* variables, which pytest sets and removes around each phase."""
    for name in set(os.environ) - set(environment):
        if not name.startswith("PYTEST_"):
            del os.environ[name]
    for name, value in environment.items():
        if not name.startswith("PYTEST_") and os.environ.get(name) != value:
            os.environ[name] = value


@pytest.fixture(autouse=True, scope="module")
def restore_environment_per_module():
    """Module-scoped fixtures (a Dask cluster) may change the environment;
    the next module starts from the session's again."""
    yield
    _restore(SESSION_ENVIRONMENT)


@pytest.fixture(autouse=True)
def restore_environment():
    """Each test starts from the environment its module started with and
    leaves nothing behind."""
    before = dict(os.environ)
    yield
    _restore(before)
