"""bench/occlusion_bands.py on a hand-made quickstart directory: each band's
p, precision and eta ratio are the hand-counted ones."""

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "occlusion_bands.py"


def write(work, variant, rows):
    with open(work / f"top10_{variant}.jsonl", "w") as f:
        for image, label, eta, prob, hit_label in rows:
            f.write(json.dumps({"image": f"/x/images/{variant}/{image}", "label": label,
                                "query_uncertainty": eta,
                                "results": [{"prob": prob, "label": hit_label}]}) + "\n")


def test_bands_are_counted_by_hand(tmp_path):
    (tmp_path / "images" / "occluded").mkdir(parents=True)
    (tmp_path / "images" / "occluded" / "occlusion.csv").write_text(
        "path,label,hidden_fraction\n0/a.png,0,0.0\n0/b.png,0,0.6\n1/c.png,1,0.7\n")
    write(tmp_path, "clean", [("0/a.png", 0, 0.1, 0.5, 0), ("0/b.png", 0, 0.1, 0.6, 0),
                              ("1/c.png", 1, 0.2, 0.4, 1)])
    write(tmp_path, "occluded", [("0/a.png", 0, 0.1, 0.5, 0), ("0/b.png", 0, 0.3, 0.5, 1),
                                 ("1/c.png", 1, 0.2, 0.3, 1)])
    out = subprocess.run([sys.executable, str(SCRIPT), "--work", str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    rows = {line.split()[0] + " " + line.split()[1]: line.split()[2:]
            for line in out.splitlines() if line.startswith("[")}
    assert rows["[0, 0.001)"] == ["1", "0.500", "1.000", "-0.500", "0.500", "1.000", "-0.500",
                                  "1.000"]
    # b and c: occluded p 0.4, right 1 of 2; clean p 0.5, right 2 of 2; eta
    # ratios 3 and 1, the upper median 3.
    assert rows["[0.5, 1]"] == ["2", "0.400", "0.500", "-0.100", "0.500", "1.000", "-0.500",
                                "3.000"]


def test_a_missing_file_is_named(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--work", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "top10_clean.jsonl is missing" in r.stderr
