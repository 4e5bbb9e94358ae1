"""The CUB recipe with a backbone exported from Python (docs/images.md).

A TorchScript backbone written by scripts/export_backbone.py (python3-torch)
goes under a hedgedb head: `hedgedb train --cub ROOT --backbone net.pt`, then
`hedgedb evaluate --protocol benchmark` prints recall@1/2/4/8 and MAP@R on the
whole test split with their Monte Carlo spread. The CUB root is a fixture in
the official layout: classes 1-4 (a subset, --class-split 2), colour PPM
images of varying sizes with bounding boxes.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from cub_fixture import write_cub


SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))
EXPORT = SOURCE / "scripts" / "export_backbone.py"

# A build without the encoders has no `hedgedb train`.
if not os.path.exists(HEDGEDB) or subprocess.run(
        [HEDGEDB, "train", "--help"], capture_output=True).returncode != 0:
    pytest.skip("hedgedb was built without the encoders", allow_module_level=True)


def run(args, cwd, expect=0):
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == expect, (args, result.returncode, result.stderr)
    return result


def last_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cub(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipe") / "CUB_200_2011"
    write_cub(root)
    return root


def test_exported_backbone_trains_and_benchmarks(cub, tmp_path):
    exported = last_json(run([sys.executable, str(EXPORT), "--arch", "small", "--image-size", "32",
                              "--out", "net.pt"], tmp_path).stdout)
    assert exported["features"] == 128
    trained = last_json(run([
        HEDGEDB, "train", "--cub", str(cub), "--class-split", "2", "--image-size", "32", "--bbox",
        "--backbone", "net.pt", "--method", "hib", "--dim", "4", "--iterations", "6",
        "--batch-size", "8", "--val-fraction", "0", "--threads", "2", "--out", "m.hdbm"],
        tmp_path).stdout)
    assert trained["iterations"] == 6
    assert trained["items_per_second"] > 0
    # No data flag: the model carries the root, size, boxes and class split.
    report = last_json(run([HEDGEDB, "evaluate", "--model", "m.hdbm", "--protocol", "benchmark",
                            "--bins", "3", "--threads", "2"], tmp_path).stdout)
    assert report["protocol"] == "benchmark"
    assert report["items"] == report["split_items"] == 12  # classes 3 and 4, all of them
    assert "subset" not in report
    assert report["samples"] == 64 and report["mc_repeats"] == 3
    clean = report["retrieval"]["clean"]
    for key in ("recall_at_1", "recall_at_2", "recall_at_4", "recall_at_8", "map_at_r"):
        value = clean[key]
        # Monte Carlo statistics come as {mean, sd, repeats} when they vary.
        mean = value["mean"] if isinstance(value, dict) else value
        assert 0.0 <= mean <= 1.0, (key, value)


def test_a_broken_backbone_is_named(cub, tmp_path):
    (tmp_path / "broken.pt").write_bytes(b"not a TorchScript archive")
    result = run([HEDGEDB, "train", "--cub", str(cub), "--class-split", "2", "--image-size", "32",
                  "--backbone", "broken.pt", "--method", "hib", "--iterations", "2",
                  "--out", "m.hdbm"], tmp_path, expect=1)
    assert "broken.pt" in result.stderr
    assert not (tmp_path / "m.hdbm").exists()


def test_benchmark_script_is_one_command_and_repeatable(cub, tmp_path):
    script = str(SOURCE / "scripts" / "benchmark.py")
    args = [sys.executable, script, "--cub", str(cub), "--out", "run", "--class-split", "2",
            "--image-size", "16", "--bbox", "--recipe", "mlp", "--dim", "4", "--threads", "2", "--bins", "3",
            "--", "--iterations", "6", "--batch-size", "8", "--mlp-hidden", "16",
            "--val-fraction", "0"]
    env = dict(os.environ, HEDGEDB_BIN=HEDGEDB)
    first = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env,
                           timeout=600)
    assert first.returncode == 0, first.stderr
    assert "recall@1" in first.stdout and "12 test queries" in first.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["queries"] == summary["split_items"] == 12
    assert summary["database_queries"] == 12
    assert summary["collection_items"] == 12
    assert [row["metric"] for row in summary["metrics"]] == [
        "recall@1", "recall@2", "recall@4", "recall@8", "MAP@R"]
    # Again: the model is reused, nothing is ingested twice, the numbers stay.
    second = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env,
                            timeout=600)
    assert second.returncode == 0, second.stderr
    assert "hedgedb train" not in second.stderr
    again = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert again == summary
    # --epochs (or --budget-items) after `--` sets the length: the script's
    # default --iterations stays out (train refuses two lengths).
    by_epochs = [a if a != "--iterations" else "--epochs" for a in args]
    by_epochs[by_epochs.index("run")] = "run-epochs"
    third = subprocess.run(by_epochs, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert third.returncode == 0, third.stderr
