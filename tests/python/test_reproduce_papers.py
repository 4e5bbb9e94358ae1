"""bench/reproduce_papers.py's summary without training: evaluation reports
written by hand for two seeds of a probabilistic model (hib1) and a point
model, summarized with --summarize-only. Kendall's tau and the
error-versus-reject area of recall@1 (evaluate's
retrieval.<split>.eta_calibration) appear side by side for the probabilistic
model only, with the claim that rejecting by eta beats chance."""

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "reproduce_papers.py"


def eval_report(tau, erc, oracle, chance):
    split = {"knn_accuracy": 0.5, "recall_at_1": 1 - chance,
             "eta_calibration": {"kendall_tau": tau, "erc_area": erc, "erc_area_oracle": oracle,
                                 "erc_area_chance": chance, "erc_queries": 100}}
    return {"retrieval": {"clean": split, "corrupt_probe": split, "corrupt": split},
            "verification": {"clean": {"average_precision": 0.9}, "corrupt": {"average_precision": 0.8}},
            "mean_eta": {"clean": 0.1, "corrupt": 0.2}}


def test_tau_and_erc_side_by_side(tmp_path):
    # Seeds 1 and 2: ERC 0.30 and 0.40 against chance 0.50 and 0.52 (paired
    # differences 0.20 and 0.12: mean 0.16, standard error 0.04, so "holds").
    for seed, (tau, erc, chance) in {1: (0.6, 0.30, 0.50), 2: (0.4, 0.40, 0.52)}.items():
        for cell, report in (("n2-d2-hib1", eval_report(tau, erc, 0.2, chance)),
                             ("n2-d2-point", {"retrieval": {"clean": {"recall_at_1": 0.5}}})):
            base = tmp_path / ("%s-s%d" % (cell, seed))
            (base.parent / (base.name + ".train.json")).write_text(json.dumps({"iterations": 10}))
            (base.parent / (base.name + ".eval.json")).write_text(json.dumps(report))
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--summarize-only",
                           "--seeds", "1", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tables = (tmp_path / "tables.md").read_text()
    assert "| model | tau clean | ERC clean | oracle | chance | tau corrupt_probe | ERC corrupt_probe" in tables
    rows = [line for line in tables.splitlines() if line.startswith("| n2-d2-hib1 | 0.500")]
    assert rows == ["| n2-d2-hib1 | 0.500 ± 0.141 | 0.350 ± 0.071 | 0.200 ± 0.000 | 0.510 ± 0.014 | "
                    "0.500 ± 0.141 | 0.350 ± 0.071 | 0.200 ± 0.000 | 0.510 ± 0.014 |"], tables
    assert not [line for line in tables.splitlines() if line.startswith("| n2-d2-point | -")], \
        "the point model has no eta: no row in the uncertainty table"
    claims = (tmp_path / "claims.md").read_text()
    line = [c for c in claims.splitlines() if "hib1, clean probes, clean gallery" in c]
    assert len(line) == 1 and "+0.160 ± 0.040 | holds |" in line[0], line


def test_hib_table1_side_by_side(tmp_path):
    # The point model of N = 2, D = 2 at two seeds: KNN clean 0.80 and 0.90
    # (mean 0.850, sd 0.071) against HIB Table 1's 0.871: difference -0.021.
    for seed, knn in {1: 0.80, 2: 0.90}.items():
        report = {"retrieval": {"clean": {"knn_accuracy": knn}, "corrupt": {"knn_accuracy": 0.5}},
                  "verification": {"clean": {"average_precision": 0.987},
                                   "corrupt": {"average_precision": 0.9}}}
        base = tmp_path / ("n2-d2-point-s%d" % seed)
        (base.parent / (base.name + ".train.json")).write_text(json.dumps({"iterations": 10}))
        (base.parent / (base.name + ".eval.json")).write_text(json.dumps(report))
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--summarize-only",
                           "--seeds", "1", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "hib_table1.md").read_text().splitlines()
    assert "| N = 2, D = 2 | point | KNN clean | 0.871 | 0.850 ± 0.071 | 2 | -0.021 |" in table, table
    assert "| N = 2, D = 2 | point | AP clean | 0.987 | 0.987 ± 0.000 | 2 | +0.000 |" in table, table
    assert "| N = 2, D = 2 | point | KNN corrupt | 0.583 | 0.500 ± 0.000 | 2 | -0.083 |" in table, table
    assert not [line for line in table if "MoG-1" in line], "no MoG-1 model in this run: no row"
