"""`pip install .` for the Python package: builds it with the project's CMake
build (the same targets as scripts/build.sh) and packs what `cmake --install`
installs for Python, plus the libraries the extension links
(python/CMakeLists.txt, component python_libraries), so that the installed
package needs nothing from the source tree or the build directory.

Environment: HEDGEDB_BUILD_DIR, the CMake build directory to configure, build
and reuse (default: build/ of this tree, the one scripts/build.sh uses);
HEDGEDB_BUILD_JOBS (default: the CPU count). Needs Debian's build dependencies
(scripts/install_deps.sh); nothing is downloaded.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

SOURCE = pathlib.Path(__file__).resolve().parent


def run(command):
    print("setup.py: " + " ".join(command), flush=True)
    subprocess.run(command, check=True)


class CMakeBuild(build_ext):
    """Configures and builds the Python targets, then copies the package that
    `cmake --install --component python` (and python_libraries) stages."""

    def run(self):
        build_dir = pathlib.Path(os.environ.get("HEDGEDB_BUILD_DIR", SOURCE / "build")).resolve()
        jobs = os.environ.get("HEDGEDB_BUILD_JOBS", str(os.cpu_count() or 1))
        run(["cmake", "-S", str(SOURCE), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
             f"-DPython_EXECUTABLE={sys.executable}"])
        targets = ["_hedgedb"]
        if (build_dir / "python" / "hedgedb" / "encoders.py").exists():
            targets.append("_encoders")
        run(["cmake", "--build", str(build_dir), "-j", jobs, "--target", *targets])
        with tempfile.TemporaryDirectory() as stage:
            for component in ("python", "python_libraries"):
                run(["cmake", "--install", str(build_dir), "--component", component, "--prefix",
                     stage])
            packages = list(pathlib.Path(stage).rglob("hedgedb/__init__.py"))
            if len(packages) != 1:
                raise RuntimeError(f"setup.py: expected one staged package, found {packages}")
            target = pathlib.Path(self.build_lib) / "hedgedb"
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(packages[0].parent, target, symlinks=True)
            keep_loader_names(target)


def keep_loader_names(package):
    """A wheel holds files, not symbolic links. The loader looks a library up
    by its soname (libhedgedb.so.0), so that link becomes the file; the
    linker's name (libhedgedb.so) and the versioned file it pointed to go,
    rather than travel as three copies."""
    links = [p for p in package.iterdir() if p.is_symlink()]
    targets = {link.resolve() for link in links}
    for link in links:
        real = link.resolve()
        link.unlink()
        if not link.name.endswith(".so"):
            shutil.copy2(real, link)
    for real in targets:
        if real.parent == package.resolve() and real.exists():
            real.unlink()


class BinaryDistribution(Distribution):
    """The package holds compiled extensions: a platform wheel."""

    def has_ext_modules(self):
        return True


# build_ext runs because the distribution says it has extension modules.
# setuptools' own scratch space goes under build/ too (ignored by git), beside
# the CMake build rather than into it.
setup(cmdclass={"build_ext": CMakeBuild}, distclass=BinaryDistribution,
      options={"build": {"build_base": str(SOURCE / "build" / "setuptools")}})
