"""`pip install .` (pyproject.toml + setup.py driving the CMake build),
offline with Debian's setuptools: the installed package imports and works
from where pip put it, with the libraries it links inside it, and needs
neither the build tree nor LD_LIBRARY_PATH."""

import os
import pathlib
import subprocess
import sys

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
PYTHON_DIR = pathlib.Path(os.environ.get("HEDGEDB_PYTHON_DIR", SOURCE / "build" / "python"))


def test_pip_install_gives_a_working_package(tmp_path):
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if pip.returncode != 0:
        pytest.skip("python3-pip is not installed")
    target = tmp_path / "site"
    # The build directory the suite runs from: configured and built already,
    # so pip reuses it instead of building the project a second time.
    env = dict(os.environ, HEDGEDB_BUILD_DIR=str(PYTHON_DIR.parent))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
         "--no-cache-dir", "--target", str(target), str(SOURCE)],
        capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    package = target / "hedgedb"
    names = {p.name for p in package.iterdir()}
    assert "libhedgedb.so.0" in names, names
    # One copy of each library: the loader's name only.
    assert not any(n.startswith("libhedgedb.so") and n != "libhedgedb.so.0" for n in names)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    check = subprocess.run([sys.executable, "-c", """
import sys, numpy as np, hedgedb
assert hedgedb.__file__.startswith(sys.argv[1]), hedgedb.__file__
with hedgedb.open(sys.argv[2]) as db:
    db.create_collection('p', kind='point', dim=3, index='Flat')
    db.ingest('p', vec=np.eye(3, dtype=np.float32))
    assert db.search('p', vec=np.eye(3, dtype=np.float32)[:1], k=1).ids[0, 0] == 0
""", str(target), str(tmp_path / "db")], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=300)
    assert check.returncode == 0, check.stderr
