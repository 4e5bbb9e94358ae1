"""bench/reproduce_papers.py's summary without training: evaluation reports
written by hand for two seeds of a probabilistic model (hib1) and a point
model, summarized with --summarize-only. Kendall's tau and the
error-versus-reject area of recall@1 (evaluate's
retrieval.<split>.eta_calibration) appear side by side for the probabilistic
model only, with the claim that rejecting by eta beats chance."""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "reproduce_papers.py"


def eval_report(tau, erc, oracle, chance):
    split = {"knn_accuracy": 0.5, "recall_at_1": 1 - chance,
             "eta_calibration": {"kendall_tau": tau, "erc_area": erc, "erc_area_oracle": oracle,
                                 "erc_area_chance": chance, "erc_queries": 100,
                                 "equal_width": {"kendall_tau": tau - 0.5}}}
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
    assert ("| model | tau clean | tau, equal-width bins | ERC clean | oracle | chance | tau corrupt_probe | "
            "tau, equal-width bins | ERC corrupt_probe") in tables
    rows = [line for line in tables.splitlines() if line.startswith("| n2-d2-hib1 | 0.500")]
    assert rows == ["| n2-d2-hib1 | 0.500 ± 0.141 | 0.000 ± 0.141 | 0.350 ± 0.071 | 0.200 ± 0.000 | 0.510 ± 0.014 | "
                    "0.500 ± 0.141 | 0.000 ± 0.141 | 0.350 ± 0.071 | 0.200 ± 0.000 | 0.510 ± 0.014 |"], tables
    assert not [line for line in tables.splitlines() if line.startswith("| n2-d2-point | -")], \
        "the point model has no eta: no row in the uncertainty table"
    claims = (tmp_path / "claims.md").read_text()
    line = [c for c in claims.splitlines() if "hib1, clean probes, clean gallery" in c]
    assert len(line) == 1 and "+0.160 ± 0.040 | holds |" in line[0], line


def test_eta_bins_picture_only_with_bins(tmp_path):
    # HIB Figure 5's bins for both binnings, from a probabilistic model's
    # report (an empty equal-width bin is null); a point model alone has no
    # eta and gets no picture.
    pytest.importorskip("matplotlib")
    point = {"retrieval": {"clean": {"knn_accuracy": 0.8}}}
    base = tmp_path / "n2-d2-point-s1"
    (base.parent / (base.name + ".train.json")).write_text(json.dumps({"iterations": 10}))
    (base.parent / (base.name + ".eval.json")).write_text(json.dumps(point))
    summarize = [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--summarize-only", "--seeds", "1"]
    done = subprocess.run(summarize, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "eta_bins.png").exists()
    bins = {"kendall_tau": 1.0, "bin_performance": [0.9, 0.8, 0.5, 0.4], "bin_sizes": [5, 5, 5, 5],
            "equal_width": {"kendall_tau": 1.0, "bin_performance": [0.8, None, 0.5, 0.4], "bin_sizes": [12, 0, 4, 4]}}
    hib = {"retrieval": {"clean": {"knn_accuracy": 0.7, "eta_calibration": bins},
                         "corrupt": {"knn_accuracy": 0.5, "eta_calibration": bins}}}
    base = tmp_path / "n2-d2-hib1-s1"
    (base.parent / (base.name + ".train.json")).write_text(json.dumps({"iterations": 10}))
    (base.parent / (base.name + ".eval.json")).write_text(json.dumps(hib))
    done = subprocess.run(summarize, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "eta_bins.png" in done.stdout + done.stderr
    assert (tmp_path / "eta_bins.png").stat().st_size > 1000


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
    table = (tmp_path / "side_by_side.md").read_text().splitlines()
    assert "| N = 2, D = 2 | point | KNN clean | 0.871 | 0.850 ± 0.071 | 2 | -0.021 |" in table, table
    assert "| N = 2, D = 2 | point | AP clean | 0.987 | 0.987 ± 0.000 | 2 | +0.000 |" in table, table
    assert "| N = 2, D = 2 | point | KNN corrupt | 0.583 | 0.500 ± 0.000 | 2 | -0.083 |" in table, table
    assert not [line for line in table if "MoG-1" in line], "no MoG-1 model in this run: no row"
    assert "| - | none of its models in this run | | | | | |" in table, "SPE Table 2: no SPE or PN"


def test_every_cell_and_table_in_the_papers_direction(tmp_path):
    # N = 3, D = 3, two seeds each. HIB Table 1 has point above MoG-1 on
    # clean KNN there (0.795 vs 0.770): the claim takes the paper's side.
    # Table 5 prints AP corrupt 0.932 for both betas: a claim of no
    # difference. SPE Table 2's corrupt support: SPE 0.878 vs PN 0.827.
    def report(knn, ap_corrupt, tau_corrupt, episodic=None):
        r = {"retrieval": {"clean": {"knn_accuracy": knn},
                           "corrupt": {"knn_accuracy": 0.5, "eta_calibration": {
                               "kendall_tau": tau_corrupt,
                               "equal_width": {"kendall_tau": None if tau_corrupt is None else tau_corrupt / 2}}}},
             "verification": {"clean": {"average_precision": 0.99},
                              "corrupt": {"average_precision": ap_corrupt}}}
        if episodic is not None:
            r["extra"] = {"items": 100, "episodes": {"accuracy": {c: {"mean": v} for c, v in zip(
                ("clean", "corrupt_support", "corrupt_query"), episodic)}}}
        return r
    models = {"point": [report(0.80, 0.90, None), report(0.82, 0.90, None)],
              "hib1": [report(0.70, 0.93, 0.6), report(0.72, 0.94, 0.5)],
              "hib1-beta0": [report(0.69, 0.93, 0.1), report(0.71, 0.92, 0.0)],
              "pn": [report(0.5, 0.9, None, (0.90, 0.80, 0.55)), report(0.5, 0.9, None, (0.92, 0.82, 0.57))],
              "spe": [report(0.5, 0.9, 0.3, (0.89, 0.90, 0.50)), report(0.5, 0.9, 0.3, (0.91, 0.92, 0.52))]}
    for model, reports in models.items():
        for seed, r in enumerate(reports, 1):
            base = tmp_path / ("n3-d3-%s-s%d" % (model, seed))
            (base.parent / (base.name + ".train.json")).write_text(json.dumps({"iterations": 10}))
            extra = r.pop("extra", None)
            (base.parent / (base.name + ".eval.json")).write_text(json.dumps(r))
            if extra:
                (base.parent / (base.name + ".extra.json")).write_text(json.dumps(extra))
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--summarize-only",
                           "--seeds", "1", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    claims = (tmp_path / "claims.md").read_text().splitlines()

    def row(text):
        found = [c for c in claims if c.startswith("| N = 3, D = 3 | " + text + " |")]
        assert len(found) == 1, (text, claims)
        return found[0]
    # point 0.81 +- 0.0141, MoG-1 0.71 +- 0.0141: +0.100 +- 0.014.
    assert row("HIB T1: point beats MoG-1 on clean identification").endswith(
        "| KNN clean 0.795 vs 0.770 | 0.810 ± 0.014 vs 0.710 ± 0.014 (KNN clean) | +0.100 ± 0.014 | holds |")
    # 0.935 +- 0.0071 vs 0.925 +- 0.0071: +0.010 +- 0.007, within two se.
    assert row("HIB T5: MoG-1 and MoG-1 beta 0 tie on AP corrupt").endswith(
        "| +0.010 ± 0.007 | holds (within noise) |")
    # tau KNN corrupt (the corrupt gallery) of MoG-1 above 0, paired with 0.
    assert row("HIB T2: eta predicts failure, MoG-1 (tau KNN corrupt > 0)").endswith(
        "| 0.67 | 0.550 ± 0.071 (tau KNN corrupt) | +0.550 ± 0.050 | holds |")
    assert row("SPE T2: SPE beats PN on corrupt support").endswith(
        "| episodic corrupt support 0.878 vs 0.827 | 0.910 ± 0.014 vs 0.810 ± 0.014 (episodic corrupt support) "
        "| +0.100 ± 0.014 | holds |")
    # PN above SPE on a clean query in the paper (0.906 vs 0.890); ours tie.
    assert row("SPE T2: PN beats SPE on clean").endswith("| +0.010 ± 0.014 | within noise |")
    assert len([c for c in claims if "| N = 3, D = 3 | SPE T2" in c]) == 3, "one claim per condition"
    assert len([c for c in claims if "| N = 3, D = 3 | HIB T5" in c]) == 8, "one per metric of Table 5"
    # An OUT without the default first cell (N = 2, D = 2): its own cell is
    # the first, and no other cell is invented.
    assert {c.split(" | ")[0] for c in claims if c.startswith("| N = ")} == {"| N = 3, D = 3"}
    assert row("HIB App. B: soft contrastive beats the margin loss (AP)").endswith("| not in this run |")
    side = (tmp_path / "side_by_side.md").read_text().splitlines()
    assert "| N = 3, D = 3 | MoG-1, beta 0 | tau KNN clean | -0.080 | - | 0 | - |" in side, side
    assert "| N = 3, D = 3 | SPE | episodic corrupt query | 0.481 | 0.510 ± 0.014 | 2 | +0.029 |" in side, side
    assert "| N = 3, D = 3 | MoG-1 | tau KNN corrupt | 0.670 | 0.550 ± 0.071 | 2 | -0.120 |" in side, side
    # The same paper figure against ours with equal-width eta bins.
    assert ("| N = 3, D = 3 | MoG-1 | tau KNN corrupt, equal-width bins | 0.670 | 0.275 ± 0.035 | 2 | -0.395 |"
            in side), side


def test_learning_curves_from_the_training_logs(tmp_path):
    # Two seeds of the point model, validated every 1,000 of 6,000 iterations.
    # Seed 1 was resumed: its log repeats 5,000 and 6,000 after the restart,
    # and the last value of an iteration wins (0.9 was cut off by the stop).
    # Seed 1: at 2,000 0.2, at 4,000 0.4, end 0.5, best 0.5, gain: mean of
    # (4k, 6k] 0.5 minus mean of (2k, 4k] 0.35 = 0.15. Seed 2: 0.3, 0.5, 0.4,
    # best 0.6, gain 0.5 - 0.4 = 0.1.
    # Seed 2's first part ran with a larger total and logged 7,000 before
    # its stop; the part that resumed at 6,000 ended there: 7,000 is not
    # part of the run.
    resumed = ("mnist 2-item composites: 43890 training items, 70 classes, 128 items/batch, 6000 iterations, "
               "resuming at 6000, validating on 1000 items, 1 threads")
    logs = {1: [(1, .1), (2, .2), (3, .3), (4, .4), (5, .5), (6, .9), "stopped", (5, .5), (6, .5)],
            2: [(1, .1), (2, .3), (3, .3), (4, .5), (5, .6), (6, .4), (7, .99), resumed]}
    for seed, entries in logs.items():
        base = tmp_path / ("n2-d2-point-s%d" % seed)
        (base.parent / (base.name + ".train.json")).write_text(json.dumps({"iterations": 6000}))
        (base.parent / (base.name + ".eval.json")).write_text(json.dumps({"retrieval": {}}))
        text = ["[train softcon] mnist 2-item composites: 43890 training items, 70 classes, 128 items/batch, "
                "6000 iterations, validating on 1000 items, 1 threads"]
        for e in entries:
            text += ["[train softcon] %s" % e] if isinstance(e, str) else [
                "[train softcon] iter %d/6000 loss 0.2" % (e[0] * 1000 - 7),
                "[train softcon] iter %d validation MAP@R %.4f%s" % (e[0] * 1000, e[1], " (best, saved)")]
        (base.parent / (base.name + ".train.log")).write_text("\n".join(text) + "\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--summarize-only",
                           "--seeds", "1", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tables = (tmp_path / "tables.md").read_text().splitlines()
    assert "| n2-d2-point | 2 | 6000 ± 0 | 0.250 ± 0.071 | 0.450 ± 0.071 | 0.450 ± 0.071 | 0.550 ± 0.071 " \
           "| 0.125 ± 0.035 |" in tables, tables
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "learning_curves.png").stat().st_size > 1000


# A stand-in for bin/hedgedb that records each call and answers in JSON, so
# that the script's command lines can be checked without training.
FAKE_HEDGEDB = """#!/bin/sh
calls="$(dirname "$0")/../calls.txt"
echo "$@" >> "$calls"
case "$1" in
  train) if [ -n "$FAKE_INTERRUPTED" ]; then
           # Ctrl-C reaches the jobs that run: this many trainings start
           # before any answers (up to 30 s), however the threads are scheduled.
           i=0
           while [ "$(grep -c '^train' "$calls")" -lt "$FAKE_INTERRUPTED" ] && [ $i -lt 300 ]; do
             sleep 0.1; i=$((i + 1))
           done
           echo '{"interrupted": true, "iterations": 2}'
         else echo '{"iterations": 5, "create_flags": {"dim": 2}}'; fi ;;
  evaluate) echo '{"items": 10, "retrieval": {"clean": {"knn_accuracy": 0.5}}}' ;;
  *) echo '{}' ;;
esac
exit ${FAKE_EXIT:-0}
"""


def fake_build(tmp_path):
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    fake = build / "bin" / "hedgedb"
    fake.write_text(FAKE_HEDGEDB)
    fake.chmod(0o755)
    return build


def fake_env(**answers):
    """The environment with the fake binary's answers (FAKE_EXIT; FAKE_INTERRUPTED=N: every
    training answers "interrupted" once N trainings have started)."""
    return dict(os.environ, **answers)


def reproduce(build, out, *flags, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), "--build", str(build), "--out", str(out),
                           "--data", "mnist", "--composite-layout", "hib-scaled", "--seeds", "1",
                           *flags], capture_output=True, text=True, env=env)


def train_calls(out):
    return {line.split("--method ")[1].split()[0] + ("" if "--components" not in line else
            line.split("--components ")[1].split()[0]): line.split()
            for line in (out / "calls.txt").read_text().splitlines() if line.startswith("train ")}


def test_iterations_presets_and_jobs(tmp_path):
    # The papers' setting: a fixed number of iterations, each paper's preset
    # (--setup only for a model without one), two models at a time.
    out = tmp_path / "out"
    done = reproduce(fake_build(tmp_path), out, "--presets", "--setup", "--arch mlp",
                     "--iterations", "36000", "--jobs", "2", "--models", "point,hib2,spe,dimco",
                     "--precision", "bf16")
    assert done.returncode == 0, done.stderr
    assert "4 models of 36000 iterations each (1 of them episodic: 4608000 training images, as many)" \
        in done.stdout, done.stdout
    calls = train_calls(out)
    assert sorted(calls) == ["dimco", "hib2", "point", "spe"], calls
    for method, argv in calls.items():
        if method == "spe":  # episodic: as many training images as 36000 batches of 128
            assert argv[argv.index("--budget-items") + 1] == "4608000" and "--iterations" not in argv, argv
            assert "--eval-every" not in argv, "train's default: 20 validations over the run"
        else:
            assert argv[argv.index("--iterations") + 1] == "36000", argv
            assert argv[argv.index("--eval-every") + 1] == "1000", argv
        assert argv[argv.index("--checkpoint-seconds") + 1] == "600", argv
        assert "--max-seconds" not in argv and "--resume" not in argv, argv
        assert argv[argv.index("--precision") + 1] == "bf16", argv
    assert calls["point"][calls["point"].index("--preset") + 1] == "hib-ndigit"
    assert calls["hib2"][calls["hib2"].index("--preset") + 1] == "hib-ndigit"
    assert calls["spe"][calls["spe"].index("--preset") + 1] == "spe-ndigit"
    assert "--arch" not in calls["point"], "a preset's model does not get --setup"
    assert "--preset" not in calls["dimco"] and "--arch" in calls["dimco"], calls["dimco"]
    for cell in ("n2-d2-point", "n2-d2-hib2", "n2-d2-spe", "n2-own-dimco"):
        assert (out / (cell + "-s1.train.json")).exists() and (out / (cell + "-s1.eval.json")).exists()
    assert "36000 iterations of training per model and seed (spe: as many training images, 4608000, in " \
           "episodes)" in (out / "tables.md").read_text()
    assert "`--precision bf16`" in (out / "tables.md").read_text()
    header = (out / "side_by_side.md").read_text()
    assert "hib2: hib-ndigit" in header and "spe: spe-ndigit" in header, header
    assert "hib1: hib-ndigit" not in header, "only the presets of the models in the run"


def test_the_snapshot_takes_the_newest_library_of_each_name(tmp_path):
    # A pip build leaves an older copy of the libraries in build/setuptools/;
    # found after the fresh one, it must not replace it in OUT/lib. Twenty
    # older copies, so that the fresh one is not the last found in any
    # directory order but by a 1-in-21 chance.
    build = fake_build(tmp_path)
    for where, text, age in [("encoders", "fresh", 0)] + [
            ("setuptools%d/lib/hedgedb" % i, "stale", 3600 + i) for i in range(20)]:
        lib = build / where / "libhedgedb_encoders.so"
        lib.parent.mkdir(parents=True)
        lib.write_text(text)
        os.utime(lib, (time.time() - age, time.time() - age))
    out = tmp_path / "out"
    done = reproduce(build, out, "--iterations", "10", "--models", "point")
    assert done.returncode == 0, done.stderr
    assert (out / "lib" / "libhedgedb_encoders.so").read_text() == "fresh"


def test_models_are_trained_seed_by_seed(tmp_path):
    out = tmp_path / "out"
    done = reproduce(fake_build(tmp_path), out, "--iterations", "10", "--models", "point,hib1",
                     "--seeds", "1", "2")
    assert done.returncode == 0, done.stderr
    trained = [line.split()[1:4:2] for line in done.stdout.splitlines() if line.startswith("training ")]
    assert trained == [["n2-d2-point", "1"], ["n2-d2-hib1", "1"], ["n2-d2-point", "2"], ["n2-d2-hib1", "2"]]


def test_a_stopped_training_resumes_from_its_checkpoint(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "n2-d2-point-s1.model.ckpt").write_text("checkpoint")
    (out / "n2-d2-point-s1.model.ckpt.state").write_text("optimizer state")
    (out / "n2-d2-point-s1.train.log").write_text("the first part's log\n")
    build = fake_build(tmp_path)
    done = reproduce(build, out, "--presets", "--iterations", "100", "--models", "point")
    assert done.returncode == 0, done.stderr
    argv = train_calls(out)["point"]
    assert argv[argv.index("--resume") + 1] == str(out / "n2-d2-point-s1.model.ckpt"), argv
    assert (out / "n2-d2-point-s1.train.log").read_text().startswith("the first part's log\n")
    assert "resuming n2-d2-point seed 1" in done.stdout
    # Without --iterations (a wall-time budget) there is no checkpoint to resume.
    out2 = tmp_path / "out2"
    done = reproduce(build, out2, "--budget", "5", "--models", "point")
    assert done.returncode == 0, done.stderr
    argv = train_calls(out2)["point"]
    assert argv[argv.index("--max-seconds") + 1] == "5.0" and "--resume" not in argv, argv


def test_a_failed_training_stops_the_run_with_its_command(tmp_path):
    out = tmp_path / "out"
    done = reproduce(fake_build(tmp_path), out, "--iterations", "10", "--jobs", "2",
                     "--models", "point,hib1", env=fake_env(FAKE_EXIT="3"))
    assert done.returncode != 0
    assert "failed (exit 3" in done.stderr and "bin/hedgedb train " in done.stderr, done.stderr
    assert not list(out.glob("*.train.json")), "a failed training leaves no report"


def test_an_interrupted_training_is_not_taken_for_a_finished_one(tmp_path):
    # Ctrl-C reaches every job's hedgedb, which exits 0 with "interrupted":
    # no report is written (the next run resumes), and no further job starts.
    out = tmp_path / "out"
    done = reproduce(fake_build(tmp_path), out, "--iterations", "10", "--jobs", "2",
                     "--models", "point,hib1,hib2,spe", env=fake_env(FAKE_INTERRUPTED="2"))
    assert done.returncode != 0
    assert "stopped (interrupted; the next run resumes it" in done.stderr, done.stderr
    assert not list(out.glob("*.train.json"))
    assert len(train_calls(out)) == 2, "the two running jobs stop; the queued ones never start"


def test_a_later_part_must_use_the_run_settings_and_the_summary_reads_them(tmp_path):
    out = tmp_path / "out"
    build = fake_build(tmp_path)
    done = reproduce(build, out, "--iterations", "10", "--presets", "--precision", "bf16",
                     "--models", "point")
    assert done.returncode == 0, done.stderr
    settings = json.loads((out / "run.json").read_text())
    assert settings["iterations"] == 10 and settings["precision"] == "bf16" and settings["presets"]
    done = reproduce(build, out, "--iterations", "20", "--presets", "--precision", "bf16",
                     "--models", "point")
    assert done.returncode != 0
    assert "--iterations 20 (this run) vs 10" in done.stderr and "choose a new --out" in done.stderr
    # The summary alone, without the training flags, still states them.
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--summarize-only",
                           "--seeds", "1", "--models", "point"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tables = (out / "tables.md").read_text()
    assert "10 iterations of training per model and seed" in tables, tables
    assert "`--precision bf16`" in tables and "point: hib-ndigit" in tables, tables


def test_a_run_begun_before_episodes_counted_images(tmp_path):
    # run.json of a run begun before spe and pn trained on --budget-items:
    # a later part goes on while no spe/pn model has begun (and records the
    # rule), and refuses once one has (its episodes are of the other kind).
    out = tmp_path / "out"
    out.mkdir()
    old = {"data": "mnist", "composite_layout": "hib-scaled", "budget": None, "iterations": 10, "presets": False,
           "precision": "fp32", "setup": "", "protocol": "hib-table2", "mc_repeats": 3, "max_items": 0,
           "extra_items": 2000}
    (out / "run.json").write_text(json.dumps(old))
    build = fake_build(tmp_path)
    done = reproduce(build, out, "--iterations", "10", "--models", "point", "--setup", "",
                     "--protocol", "hib-table2")
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "run.json").read_text())["episodic_budget"] == "items"
    (out / "run.json").write_text(json.dumps(old))
    (out / "n2-d2-spe-s1.model.ckpt").write_text("36000 episodes' checkpoint")
    done = reproduce(build, out, "--iterations", "10", "--models", "point,spe", "--setup", "",
                     "--protocol", "hib-table2")
    assert done.returncode != 0
    assert "trained spe/pn for 10 episodes" in done.stderr and "n2-d2-spe-s1.model.ckpt" in done.stderr, done.stderr


def test_a_checkpoint_without_its_state_is_trained_afresh(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "n2-d2-point-s1.model.ckpt").write_text("weights, but the state never written")
    done = reproduce(fake_build(tmp_path), out, "--iterations", "10", "--models", "point")
    assert done.returncode == 0, done.stderr
    assert "a checkpoint cut short" in done.stdout, done.stdout
    assert "--resume" not in train_calls(out)["point"]
    assert not (out / "n2-d2-point-s1.model.ckpt").exists()
