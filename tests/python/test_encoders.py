"""hedgedb.encoders.Model: images -> the arrays DB.ingest takes, as
`hedgedb ingest-images` embeds them (bitwise), from files or NumPy arrays."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

hedgedb = pytest.importorskip("hedgedb")
try:
    import hedgedb.encoders as encoders
except ImportError:
    pytest.skip("hedgedb was built without the encoders", allow_module_level=True)

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))
DATA = ["--data", "fashion-mnist", "--items", "2", "--train-total", "2000", "--test-total", "400"]


def cli(args, cwd, env=None):
    result = subprocess.run([HEDGEDB] + args, cwd=cwd, capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, (args, result.stderr)
    return result


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("encoders")
    cli(["train", "--method", "hib", "--arch", "mlp", "--mlp-hidden", "16", "--iterations", "5",
         "--batch-size", "16", "--val-fraction", "0", "--threads", "2", "--out", "m.hdbm"]
        + DATA, work)
    cli(["export-images", "--count", "12", "--out", "gallery"] + DATA, work)
    paths = sorted(str(p) for p in (work / "gallery").rglob("*.png"))
    assert len(paths) == 12
    return work, paths


# Same environment: bitwise equal on purpose. Both processes embed with the
# same thread counts for LibTorch and OpenBLAS (encoders::SetEncoderThreads
# sets both from `threads`), so every reduction runs in the same order; and
# conftest.py keeps other tests (Dask's LocalCluster) from changing the
# environment this test's subprocess inherits.
# The thread variables that Dask's LocalCluster sets, given to the CLI only:
# SetEncoderThreads overrides them, but a library we do not control may still
# read them (a BLAS built otherwise, another CPU's kernels), so this case
# allows 4 float32 ulps (relative 4.8e-7) instead of demanding the bits.
@pytest.mark.parametrize("thread_env", [{}, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                             "OPENBLAS_NUM_THREADS": "1"}],
                         ids=["same_env", "dask_thread_env"])
def test_embeddings_equal_ingest_images(trained, thread_env):
    work, paths = trained
    model = encoders.Model(str(work / "m.hdbm"), threads=2)
    assert model.spec["kind"] == "gaussian" and model.spec["input_shape"] == [1, 28, 56]
    arrays = model.embed_images(paths)
    assert arrays["mean"].shape == arrays["var"].shape == (12, 2)
    db_path = str(work / ("cli_db_" + str(len(thread_env))))
    cli(["ingest-images", "--db", db_path, "--collection", "c", "--model", "m.hdbm", "--dir",
         "gallery", "--no-progress", "--threads", "2"], work, env=dict(os.environ, **thread_env))
    with hedgedb.open(db_path, create_if_missing=False) as db:
        ids = db.list_ids("c")
        for record in db.get("c", ids):
            path = __import__("json").loads(record["payload"])["path"]
            row = paths.index(path)
            for name in ("mean", "var"):
                if thread_env:
                    np.testing.assert_allclose(record[name], arrays[name][row], rtol=4.8e-7,
                                               atol=0)
                else:
                    np.testing.assert_array_equal(record[name], arrays[name][row])


def test_arrays_embed_as_the_same_pixels_in_files(trained, tmp_path):
    work, _ = trained
    model = encoders.Model(str(work / "m.hdbm"), threads=2)
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(5, 1, 28, 56), dtype=np.uint8)
    files = []
    for i, image in enumerate(pixels):
        path = tmp_path / f"{i}.pgm"
        path.write_bytes(b"P5\n56 28\n255\n" + image[0].tobytes())
        files.append(str(path))
    from_files = model.embed_images(files)
    from_arrays = model.embed_arrays(pixels)
    for name in ("mean", "var"):
        np.testing.assert_array_equal(from_files[name], from_arrays[name])
    # floats in [0, 1] are the same pixels
    floats = model.embed_arrays(pixels.astype(np.float32) / 255.0)
    np.testing.assert_allclose(floats["mean"], from_arrays["mean"], rtol=1e-6)


def test_images_to_a_collection_in_five_lines(trained, tmp_path):
    work, paths = trained
    model = encoders.Model(str(work / "m.hdbm"), threads=2)
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("photos", **model.create_kwargs)
        db.ingest("photos", **model.embed_images(paths), labels=np.arange(12) % 3)
        res = db.search("photos", **model.embed_images(paths[:2], queries=True), k=3,
                        exhaustive=True)
    assert res.ids.shape == (2, 3) and np.all(res.ids >= 0)


def test_errors_name_the_problem(trained, tmp_path):
    work, paths = trained
    model = encoders.Model(str(work / "m.hdbm"), threads=2)
    with pytest.raises(hedgedb.InvalidArgumentError, match="no_such.png"):
        model.embed_images(paths[:2] + [str(tmp_path / "no_such.png")])
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(pathlib.Path(paths[0]).read_bytes()[:40])
    with pytest.raises(hedgedb.InvalidArgumentError, match="cut.png"):
        model.embed_images([str(truncated)])
    with pytest.raises(hedgedb.InvalidArgumentError, match=r"takes \(n, 1, 28, 56\)"):
        model.embed_arrays(np.zeros((2, 28, 56), np.uint8))
    with pytest.raises(hedgedb.InvalidArgumentError, match="unknown fit"):
        model.embed_images(paths[:1], fit="stretch")
    with pytest.raises(hedgedb.InvalidArgumentError, match="cannot load model"):
        encoders.Model(str(tmp_path / "absent.hdbm"))


def test_errors_name_the_keyword_not_the_flag(trained, tmp_path):
    """An image of another size: the library's hint names the option as
    embed_images takes it (fit="resize"), not the CLI's --fit; and that
    keyword converts the image."""
    work, paths = trained
    small = tmp_path / "small.pgm"
    small.write_bytes(b"P5\n28 28\n255\n" + bytes(range(28)) * 28)
    model = encoders.Model(str(work / "m.hdbm"), threads=2)
    with pytest.raises(hedgedb.InvalidArgumentError) as raised:
        model.embed_images([str(small)])
    message = str(raised.value)
    assert ("small.pgm: the image is 28 x 28 with 1 channel but the model takes 28 x 56 with "
            "1 channel (fit resize or crop converts it)") in message, message
    assert "--" not in message, message
    assert model.embed_images([str(small)], fit="resize")["mean"].shape == (1, 2)


@pytest.fixture(scope="module")
def calibrated(trained):
    """A model whose file carries a calibration map (train with a validation
    split fits one), and the gallery images of `trained`."""
    work, paths = trained
    out = cli(["train", "--method", "hib", "--arch", "mlp", "--mlp-hidden", "16", "--iterations",
               "5", "--batch-size", "16", "--val-fraction", "0.2", "--threads", "2", "--out",
               "calibrated.hdbm"] + DATA, work)
    report = __import__("json").loads(out.stdout.splitlines()[-1])
    assert "calibration" in report, out.stderr
    return work, paths, report["calibration"]


def test_a_model_map_makes_the_collection_calibrated_as_ingest_images_does(calibrated, tmp_path):
    work, paths, fitted = calibrated
    model = encoders.Model(str(work / "calibrated.hdbm"), threads=2)
    assert isinstance(model.calibration_map, bytes)
    info = model.calibration
    assert (info["score"], info["method"], info["pairs"]) == (
        fitted["score"], fitted["method"], fitted["pairs"])
    assert info["base_rate"] == pytest.approx(fitted["base_rate"], rel=1e-12)
    queries = model.embed_images(paths[:3], queries=True)
    labels = np.arange(12) % 3
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("photos", **model.create_kwargs)
        db.ingest("photos", **model.embed_images(paths), labels=labels)
        uncalibrated = db.search("photos", **queries, k=4, exhaustive=True)
        assert np.all(np.isnan(uncalibrated.probs))
        db.import_calibration("photos", model.calibration_map)
        res = db.search("photos", **queries, k=4, exhaustive=True)
        (stored,) = db.stats("photos")["calibrations"]
    assert np.all(np.isfinite(res.probs)) and np.all((res.probs >= 0) & (res.probs <= 1))
    assert (stored["score"], stored["method"]) == (info["score"], info["method"])
    assert stored["base_rate"] == pytest.approx(info["base_rate"], rel=1e-12)

    # ingest-images: a new collection from this model starts calibrated with
    # the same map, so the same queries get the same scores and probabilities
    # (ids may differ: compared as each row's (score, prob) pairs).
    cli_db = str(tmp_path / "cli_db")
    out = cli(["ingest-images", "--db", cli_db, "--collection", "photos", "--model",
               "calibrated.hdbm", "--dir", "gallery", "--no-progress", "--threads", "2"], work)
    assert __import__("json").loads(out.stdout)["calibrated"] is True
    with hedgedb.open(cli_db, create_if_missing=False) as db:
        theirs = db.search("photos", **queries, k=4, exhaustive=True)
        (their_map,) = db.stats("photos")["calibrations"]
    assert their_map == dict(stored, sequence=their_map["sequence"])
    for row in range(3):
        ours = sorted(zip(res.scores[row], res.probs[row]))
        other = sorted(zip(theirs.scores[row], theirs.probs[row]))
        np.testing.assert_array_equal(np.array(ours), np.array(other))


def test_import_calibration_refuses_what_cannot_be_stored(calibrated, trained, tmp_path):
    work, _, _ = calibrated
    model = encoders.Model(str(work / "calibrated.hdbm"), threads=2)
    bare = encoders.Model(str(trained[0] / "m.hdbm"), threads=2)
    assert bare.calibration_map is None and bare.calibration is None
    with hedgedb.open(str(tmp_path / "db")) as db:
        db.create_collection("photos", **model.create_kwargs)
        with pytest.raises(hedgedb.InvalidArgumentError, match="val-fraction"):
            db.import_calibration("photos", bare.calibration_map)
        with pytest.raises(hedgedb.Error, match="not a calibration map"):
            db.import_calibration("photos", b"x" * 64)
        with pytest.raises(hedgedb.InvalidArgumentError, match="base_rate must be in"):
            db.import_calibration("photos", model.calibration_map, base_rate=1.5)
        with pytest.raises(hedgedb.NotFoundError):
            db.import_calibration("absent", model.calibration_map)
        db.create_collection("points", "point", 2)
        with pytest.raises(hedgedb.InvalidArgumentError, match="point collections do not have"):
            db.import_calibration("points", model.calibration_map)
        assert db.stats("photos")["calibrations"] == []
        # Re-targeted to another rate of matching pairs.
        db.import_calibration("photos", model.calibration_map, base_rate=0.25)
        assert db.stats("photos")["calibrations"][0]["base_rate"] == pytest.approx(0.25)


def test_another_models_embeddings_are_refused_as_ingest_images_refuses(calibrated, tmp_path):
    # Two models of one kind and size (gaussian, dim 2), trained apart: each
    # embeds into a space of its own (encoders::CheckCollectionModel).
    work, paths, _ = calibrated
    model = encoders.Model(str(work / "m.hdbm"), threads=2)
    other = encoders.Model(str(work / "calibrated.hdbm"), threads=2)
    cli_db = str(tmp_path / "cli_db")
    cli(["ingest-images", "--db", cli_db, "--collection", "g", "--model", "m.hdbm", "--dir",
         "gallery", "--no-progress", "--threads", "2"], work)
    refused = subprocess.run([HEDGEDB, "ingest-images", "--db", cli_db, "--collection", "g",
                              "--model", "calibrated.hdbm", "--dir", "gallery", "--no-progress"],
                             cwd=work, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 1, refused.stderr
    assert "collection 'g' holds embeddings of another model" in refused.stderr
    pixels = np.zeros((2, 1, 28, 56), dtype=np.uint8)
    with hedgedb.open(cli_db, create_if_missing=False) as db:
        for embed in (lambda **kw: other.embed_images(paths, **kw),
                      lambda **kw: other.embed_arrays(pixels, **kw)):
            with pytest.raises(hedgedb.InvalidArgumentError,
                               match="collection 'g' holds embeddings of another model .*"
                                     "calibrated.hdbm.*cannot join them"):
                embed(db=db, collection="g")
            with pytest.raises(hedgedb.InvalidArgumentError,
                               match="its queries cannot be compared with them"):
                embed(db=db, collection="g", queries=True)
        # The collection's own model passes, with the same arrays as unchecked.
        ours = model.embed_images(paths, db=db, collection="g")
        np.testing.assert_array_equal(ours["mean"], model.embed_images(paths)["mean"])
        with pytest.raises(hedgedb.InvalidArgumentError, match="db and collection together"):
            model.embed_images(paths, db=db)
        with pytest.raises(hedgedb.NotFoundError):
            model.embed_images(paths, db=db, collection="absent")
        assert len(db.list_ids("g")) == 12

    # A collection Python makes from a model records it, so ingest-images
    # refuses another model's images there too.
    py_db = str(tmp_path / "py_db")
    with hedgedb.open(py_db) as db:
        db.create_collection("p", **other.create_kwargs)
        db.ingest("p", **other.embed_images(paths, db=db, collection="p"))
        record = __import__("json").loads(db.stats("p")["metadata"])["images"]
        assert record["model"] == str(work / "calibrated.hdbm")
        # A collection of another kind or size is refused as ingest-images
        # refuses it (encoders::CheckCollectionFitsModel), before any model
        # record is read.
        db.create_collection("points", "point", 2, match_a=1.0, match_b=2.0)
        with pytest.raises(hedgedb.InvalidArgumentError,
                           match="collection 'points' \\(point dim 2 .*does not match model"):
            other.embed_images(paths, db=db, collection="points")
    refused = subprocess.run([HEDGEDB, "query-image", "--db", py_db, "--collection", "p",
                              "--model", "m.hdbm", paths[0], "--no-progress"],
                             cwd=work, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 1, refused.stderr
    assert "collection 'p' holds embeddings of another model" in refused.stderr
    assert "queries cannot be compared" in refused.stderr


def model_file_sections(path):
    """The header JSON and (format 3) the calibration info JSON of a model
    file, read from its bytes as encoders/models/model_file.h lays them out."""
    import json
    import struct
    data = pathlib.Path(path).read_bytes()
    (header_length,) = struct.unpack_from("<Q", data, 12)
    header = json.loads(data[20:20 + header_length])
    (payload_length,) = struct.unpack_from("<Q", data, 20 + header_length)
    rest = data[28 + header_length + payload_length:-4]
    info = None
    if rest:
        (info_length,) = struct.unpack_from("<Q", rest, 0)
        info = json.loads(rest[8:8 + info_length])
    return header, info


def test_spec_and_calibration_are_the_model_files_fields(calibrated):
    # Model.spec is the header the file holds (every field, the training
    # data as a dict) plus search_score; Model.calibration the stored info,
    # with the fields db.stats()["calibrations"] lists.
    work, _, _ = calibrated
    for name in ("m.hdbm", "calibrated.hdbm"):
        model = encoders.Model(str(work / name), threads=2)
        header, info = model_file_sections(work / name)
        assert header.pop("format") == "hedgedb-model"
        spec = dict(model.spec)
        assert spec.pop("search_score") == "mc"
        assert spec == header
        assert spec["data"]["source"] == "fashion-mnist"
        assert (info is None) == (model.calibration is None)
    assert info == model.calibration
    with hedgedb.open(str(work / "spec_db")) as db:
        db.create_collection("photos", **model.create_kwargs)
        db.import_calibration("photos", model.calibration_map)
        (stored,) = db.stats("photos")["calibrations"]
    assert set(stored) == set(model.calibration)
