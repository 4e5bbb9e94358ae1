"""Makes the build tree's Python package importable: HEDGEDB_PYTHON_DIR (set
by CTest), else build/python beside the sources."""

import os
import pathlib
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("HEDGEDB_PYTHON_DIR", str(SOURCE / "build" / "python")))
# Dask workers are other processes: they find the package through the
# environment.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [sys.path[0]] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
