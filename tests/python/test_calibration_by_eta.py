"""scripts/calibration_by_eta.py (quickstart step 7): the per-eta-half table
and the ECE of the returned results, on JSON lines whose answers are known."""

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "calibration_by_eta.py"


def write(path, queries):
    path.write_text("".join(json.dumps(q) + "\n" for q in queries))
    return str(path)


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_halves_and_ece(tmp_path):
    # Four queries: eta 0.1, 0.2 (low half: median 0.25 -> <= goes low), 0.3, 0.4.
    # Top-1 probs 0.9, 0.7 (low; one right) and 0.2, 0.4 (high; none right).
    queries = []
    for i, (eta, p, right) in enumerate([(0.1, 0.9, True), (0.2, 0.7, False),
                                         (0.3, 0.2, False), (0.4, 0.4, False)]):
        queries.append({"query": i, "label": 1, "query_uncertainty": eta,
                        "results": [{"id": 10 + i, "prob": p, "label": 1 if right else 2},
                                    {"id": 20 + i, "prob": 0.05, "label": 1}]})
    path = write(tmp_path / "a.jsonl", queries)
    out = run("a=" + path, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)[0]
    low, high = report["halves"]
    assert (low["queries"], high["queries"]) == (2, 2)
    assert abs(low["mean_top1_prob"] - 0.8) < 1e-12 and low["precision_at_1"] == 0.5
    assert abs(high["mean_top1_prob"] - 0.3) < 1e-12 and high["precision_at_1"] == 0.0
    # ECE of the top-1 with 4 results and 15 bins: one result a bin.
    assert abs(report["ece_top1"] - (0.1 + 0.7 + 0.2 + 0.4) / 4) < 1e-12
    # Top-10: 8 results, the 4 second-ranked ones (p 0.05, all right) add 0.95 each.
    assert abs(report["ece_top10"] - (0.1 + 0.7 + 0.2 + 0.4 + 4 * 0.95) / 8) < 1e-12
    table = run("a=" + path)
    assert "a, low eta" in table.stdout and "worst |gap| over the halves: 0.300" in table.stdout


def test_errors_name_the_problem(tmp_path):
    no_prob = write(tmp_path / "b.jsonl", [{"label": 1, "query_uncertainty": 0.1,
                                            "results": [{"id": 1, "label": 1}]}])
    out = run("b=" + no_prob)
    assert out.returncode != 0 and "calibrate" in out.stderr
    no_label = write(tmp_path / "c.jsonl", [{"query_uncertainty": 0.1, "results": []}])
    out = run("c=" + no_label)
    assert out.returncode != 0 and "'label'" in out.stderr
    out = run(no_label)
    assert out.returncode == 2 and "NAME=FILE" in out.stderr


def test_match_set_coverage(tmp_path):
    # Conformal sets (query-image --coverage): the results are the set. Four
    # queries, eta 0.1/0.2 (low half) and 0.3/0.4 (high half); the sets of
    # the first, second and fourth hold a same-label item: coverage 3/4, low
    # half 1.0, high half 0.5; set sizes 2, 1, 0, 3.
    rows = [(0.1, [1, 2]), (0.2, [1]), (0.3, []), (0.4, [2, 2, 1])]
    queries = [{"query": i, "label": 1, "query_uncertainty": eta,
                "results": [{"id": j, "prob": 0.5, "label": l} for j, l in enumerate(labels)]}
               for i, (eta, labels) in enumerate(rows)]
    top = write(tmp_path / "top.jsonl", [dict(q, results=[{"id": 0, "prob": 0.5, "label": 1}])
                                         for q in queries])
    sets = write(tmp_path / "sets.jsonl", queries)
    out = run("a=" + top, "--sets", "a=" + sets, "--json")
    assert out.returncode == 0, out.stderr
    c = json.loads(out.stdout)[1]
    assert c["coverage"] == 0.75 and c["mean_set_size"] == 1.5
    assert c["coverage_by_half"] == {"low eta": 1.0, "high eta": 0.5}
    table = run("a=" + top, "--sets", "a=" + sets)
    assert "a: match-set coverage 0.750 (low eta 1.000, high eta 0.500), mean set size 1.5" \
        in table.stdout


def test_realised_false_match_rate(tmp_path):
    # A gallery of 3 images of label 1 and 2 of label 2; two queries of
    # label 1 (2 non-matching gallery images each) and one of label 2 (3):
    # 7 non-matching pairs. Returned: one wrong result for the first query,
    # none for the second, two for the third: 3 of 7.
    gallery = tmp_path / "gallery"
    for label, n in ((1, 3), (2, 2)):
        (gallery / str(label)).mkdir(parents=True)
        for i in range(n):
            (gallery / str(label) / f"{i}.png").write_bytes(b"")
    rows = [(1, [1, 2]), (1, [1]), (2, [1, 1, 2])]
    queries = [{"query": i, "label": label, "query_uncertainty": 0.1 * (i + 1),
                "results": [{"id": j, "prob": 0.9, "label": l} for j, l in enumerate(found)]}
               for i, (label, found) in enumerate(rows)]
    path = write(tmp_path / "fmr.jsonl", queries)
    out = run("a=" + path, "--false-match", "a=" + path, "--gallery", str(gallery), "--json")
    assert out.returncode == 0, out.stderr
    f = json.loads(out.stdout)[1]
    assert (f["false_matches"], f["non_matching_pairs"]) == (3, 7)
    assert abs(f["false_match_rate"] - 3 / 7) < 1e-12
    out = run("a=" + path, "--false-match", "a=" + path)
    assert out.returncode == 2 and "--gallery" in out.stderr
