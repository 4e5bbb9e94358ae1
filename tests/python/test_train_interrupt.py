"""`hedgedb train` as a person runs it: an estimate of the run's duration up
front, Ctrl-C (SIGINT) stops early and keeps the best model so far plus a
checkpoint to resume from, and the checkpoints written because time passed
are removed when a run completes."""

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEDGEDB = os.environ.get("HEDGEDB_BIN", str(SOURCE / "build" / "bin" / "hedgedb"))
DATA = ["--data", "fashion-mnist", "--items", "2", "--train-total", "2000", "--test-total", "400"]
SMALL = ["--method", "hib", "--arch", "mlp", "--mlp-hidden", "16", "--batch-size", "16",
         "--threads", "1", "--val-items", "100", "--eval-every", "20"] + DATA


def test_ctrl_c_keeps_the_best_model_and_a_checkpoint(tmp_path):
    model = tmp_path / "m.hdbm"
    proc = subprocess.Popen([HEDGEDB, "train", *SMALL, "--iterations", "1000000",
                             "--progress-seconds", "1", "--out", str(model)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    stderr = []
    deadline = time.monotonic() + 300
    try:
        # Wait for a validation (a best model exists), then press Ctrl-C.
        for line in proc.stderr:
            stderr.append(line)
            if "validation MAP@R" in line:
                break
            assert time.monotonic() < deadline, "".join(stderr)
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr.append(rest)
    log = "".join(stderr)
    assert proc.returncode == 0, log
    assert "estimate at the first iterations' pace" in log and "Ctrl-C" in log, log
    assert "stopped on request" in log, log
    report = json.loads(out)
    assert report["interrupted"] is True
    assert report["iterations"] < 1000000
    assert report["best_iteration"] > 0
    checkpoint = pathlib.Path(report["checkpoint"])
    assert checkpoint.exists() and pathlib.Path(str(checkpoint) + ".state").exists()
    # The kept model is whole: it embeds images.
    result = subprocess.run([HEDGEDB, "export-images", "--count", "4", "--out", "g"] + DATA,
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    result = subprocess.run([HEDGEDB, "ingest-images", "--db", "db", "--collection", "c",
                             "--model", str(model), "--dir", "g", "--no-progress"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    # The run resumes from the checkpoint.
    resumed = subprocess.run([HEDGEDB, "train", *SMALL, "--iterations",
                              str(report["iterations"] + 10), "--resume", str(checkpoint),
                              "--out", str(tmp_path / "m2.hdbm")],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["start_iteration"] == report["iterations"]
    # Into another model file, the checkpoint is not that run's: it stays.
    assert checkpoint.exists() and pathlib.Path(str(checkpoint) + ".state").exists()
    # Resumed into its own model file and completed, the run's checkpoint has
    # served (as timed ones do when a run completes): it goes, whole.
    resumed = subprocess.run([HEDGEDB, "train", *SMALL, "--iterations",
                              str(report["iterations"] + 10), "--resume", str(checkpoint),
                              "--out", str(model)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert not list(tmp_path.glob("m.hdbm.ckpt*")), list(tmp_path.iterdir())


def test_timed_checkpoints_go_when_the_run_completes(tmp_path):
    model = tmp_path / "m.hdbm"
    result = subprocess.run([HEDGEDB, "train", *SMALL, "--iterations", "40",
                             "--checkpoint-seconds", "0.001", "--out", str(model)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "interrupted" not in json.loads(result.stdout)
    assert model.exists()
    assert not list(tmp_path.glob("m.hdbm.ckpt*")), list(tmp_path.iterdir())


def test_checkpoint_seconds_refuses_negative(tmp_path):
    result = subprocess.run([HEDGEDB, "train", *SMALL, "--checkpoint-seconds", "-1", "--out",
                             str(tmp_path / "m.hdbm")], capture_output=True, text=True)
    assert result.returncode == 2 and "--checkpoint-seconds" in result.stderr
