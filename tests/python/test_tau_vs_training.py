"""bench/tau_vs_training.py without training: a stand-in for bin/hedgedb
answers `evaluate` with a report whose taus follow the checkpoint's
iteration, so the table can be checked row by row; a report already in the
directory (the finished model's) joins the series without an evaluation,
and a failed evaluation stops the script with its exit code."""

import json
import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "tau_vs_training.py"

# tau = iteration / 10,000 (equal counts), half of it over equal widths;
# KNN accuracy 0.5 + iteration / 100,000; the flags are recorded.
FAKE = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls.txt"
[ -n "$FAKE_EXIT" ] && exit "$FAKE_EXIT"
model=""
while [ $# -gt 0 ]; do [ "$1" = "--model" ] && model="$2"; shift; done
it=$(basename "$model" .model | sed 's/.*-//')
/usr/bin/python3 - "$it" <<'PY'
import json, sys
t = int(sys.argv[1]) / 10000
cal = {"kendall_tau": {"mean": t, "sd": 0.01, "repeats": 3}, "erc_area": 0.1,
       "equal_width": {"kendall_tau": t / 2}}
split = {"knn_accuracy": 0.5 + t / 10, "eta_calibration": cal}
print(json.dumps({"retrieval": {"clean": split, "corrupt": split},
                  "verification": {"clean": {"eta_calibration": cal}, "corrupt": {"eta_calibration": cal}}}))
PY
"""


def make_checkpoints(tmp_path):
    fake = tmp_path / "hedgedb"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    for it in (4000, 8000):
        (ckpts / ("hib1-s2-%d.model" % it)).write_bytes(b"weights")
    return fake, ckpts


def run(fake, ckpts, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), "--dir", str(ckpts), "--hedgedb", str(fake),
                           "--seed", "2"], capture_output=True, text=True, env=env)


def test_table_of_taus_against_iterations(tmp_path):
    fake, ckpts = make_checkpoints(tmp_path)
    # The finished model's report, copied in: no evaluation for it.
    (ckpts / "hib1-s2-36000.eval.json").write_text(json.dumps(
        {"retrieval": {"clean": {"knn_accuracy": 0.9, "eta_calibration": {"kendall_tau": 0.95}}}}))
    done = run(fake, ckpts)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) == 2, calls
    for it, call in zip((4000, 8000), sorted(calls)):
        argv = call.split()
        assert argv[0] == "evaluate"
        assert argv[argv.index("--model") + 1] == str(ckpts / ("hib1-s2-%d.model" % it))
        for flag, val in (("--protocol", "hib-table2"), ("--pairs", "10000"), ("--seed", "2"),
                          ("--mc-repeats", "3"), ("--data", "mnist"), ("--items", "2"),
                          ("--composite-layout", "hib-scaled")):
            assert argv[argv.index(flag) + 1] == val, (flag, argv)
    table = (ckpts / "tau_vs_training.md").read_text().splitlines()
    assert "## hib1-s2" in table
    assert "| 4000 | 0.540 | 0.400 | 0.200 | 0.400 | 0.200 | 0.400 | 0.400 | 0.100 |" in table, table
    assert "| 8000 | 0.580 | 0.800 | 0.400 | 0.800 | 0.400 | 0.800 | 0.800 | 0.100 |" in table, table
    assert "| 36000 | 0.900 | 0.950 | - | - | - | - | - | - |" in table, table

    # Again: every report exists, nothing is evaluated.
    done = run(fake, ckpts)
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 2


def test_a_failed_evaluation_stops_the_script(tmp_path):
    fake, ckpts = make_checkpoints(tmp_path)
    done = run(fake, ckpts, env=dict(os.environ, FAKE_EXIT="3"))
    assert done.returncode != 0
    assert "evaluate failed (exit 3)" in done.stderr
    assert not list(ckpts.glob("*.eval.json")), "no report from a failed evaluation"
