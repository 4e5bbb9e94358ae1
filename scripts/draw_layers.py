#!/usr/bin/python3
"""Draws the rooms of the source tree and who includes whom: docs/img/layers.png.

    /usr/bin/python3 scripts/draw_layers.py [--out docs/img/layers.png]

The arrows are counted from the sources (#include "room/..." lines, one
per file and line), not drawn by hand, so the picture cannot drift from the
code. The core's layers (common, storage, index, calibration, query) are
drawn with what their CMakeLists.txt lets them see (hedgedb_core_layer(...
SEES ...)): an include the build would refuse is drawn red and makes the
script exit 1 (the build refuses it first; see docs/design.md, "Layers").
Every room includes the public headers (include/hedgedb/); that is the
band at the bottom, not one arrow per room. Needs python3-matplotlib.
"""

import argparse
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Rows from the top; positions within a row are the x coordinates.
LAYOUT = {
    "tools": (1.0, 5), "python": (2.5, 5),
    "datasets": (3.1, 3.9), "report": (5.3, 3.9),
    "encoders": (1.0, 2.8),
    "query": (3.9, 2.8),
    "storage": (2.5, 1.5), "index": (3.9, 1.5), "calibration": (5.3, 1.5),
}
BANDS = ("common",)  # included nearly everywhere: a band with counts, not arrows
CORE = ("common", "storage", "index", "calibration", "query")
WHAT = {
    "tools": "the hedgedb command line",
    "python": "import hedgedb",
    "datasets": "data-set readers, images",
    "report": "calibration pictures",
    "encoders": "LibTorch encoders",
    "query": "collections, search, DB",
    "storage": "RocksDB records",
    "index": "FAISS stage 1",
    "calibration": "score -> probability",
    }


def include_edges():
    edges = collections.Counter()
    pattern = re.compile(r'\s*#\s*include\s+"([a-z_]+)/')
    for room in list(LAYOUT) + list(BANDS):
        for folder, _, files in os.walk(os.path.join(ROOT, room)):
            for name in files:
                if not name.endswith((".cc", ".h")):
                    continue
                with open(os.path.join(folder, name), errors="replace") as f:
                    for line in f:
                        m = pattern.match(line)
                        if m and m.group(1) != room and m.group(1) in CORE + tuple(LAYOUT):
                            edges[(room, m.group(1))] += 1
    return edges


def core_sees():
    sees = {}
    pattern = re.compile(r"hedgedb_core_layer\((\w+)(?:\s+SEES\s+([\w\s]+))?\)")
    for room in CORE:
        with open(os.path.join(ROOT, room, "CMakeLists.txt")) as f:
            m = pattern.search(f.read())
        if not m or m.group(1) != room:
            sys.exit(f"{room}/CMakeLists.txt has no hedgedb_core_layer({room} ...)")
        sees[room] = set((m.group(2) or "").split())
    return sees


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "layers.png"))
    args = parser.parse_args()
    edges = include_edges()
    sees = core_sees()
    refused = [(a, b) for (a, b) in edges if a in CORE and b not in sees[a]]
    for a, b in refused:
        print(f"{a} includes {b}, which its CMakeLists.txt does not let it see", file=sys.stderr)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import FancyBboxPatch
    except ImportError:
        sys.exit("matplotlib is not installed (python3-matplotlib)")

    fig, ax = plt.subplots(figsize=(10, 7.2))
    w, h = 1.15, 0.62
    for room, (x, y) in LAYOUT.items():
        core = room in CORE
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.03",
                                    facecolor="#dbe8f6" if core else "#f3f3f3",
                                    edgecolor="#2b5d8c" if core else "#777777", lw=1.4))
        ax.text(x, y + 0.1, room + "/", ha="center", va="center", fontsize=11, weight="bold")
        ax.text(x, y - 0.15, WHAT[room], ha="center", va="center", fontsize=7.5, color="#444444")
    for (a, b), count in sorted(edges.items()):
        if b in BANDS or a in BANDS:
            continue
        (xa, ya), (xb, yb) = LAYOUT[a], LAYOUT[b]
        bad = (a, b) in refused
        ax.annotate("", xy=(xb, yb + (h / 2 if yb < ya else -h / 2)),
                    xytext=(xa, ya - (h / 2 if yb < ya else -h / 2)),
                    arrowprops=dict(arrowstyle="-|>", color="red" if bad else "#555555",
                                    lw=0.8 + 0.12 * min(count, 20), shrinkA=2, shrinkB=2,
                                    connectionstyle="arc3,rad=0.06"))
        mx, my = (xa + xb) / 2, (ya + yb) / 2
        ax.text(mx, my, str(count), fontsize=7, color="red" if bad else "#333333",
                ha="center", va="center",
                bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8))
    # The utility layer and the public headers, which (nearly) every room
    # includes: bands, with the count of #include lines of each room.
    users = sorted(((count, a) for (a, b), count in edges.items() if b == "common"), reverse=True)
    ax.add_patch(FancyBboxPatch((0.3, 0.2), 5.6, 0.6, boxstyle="round,pad=0.03",
                                facecolor="#dbe8f6", edgecolor="#2b5d8c", lw=1.4))
    ax.text(3.1, 0.62, "common/   utilities (status, CRC32C, coding, files, row layout, .npy)",
            ha="center", va="center", fontsize=10, weight="bold")
    ax.text(3.1, 0.35, "included by " + ", ".join(f"{a} {c}" for c, a in users),
            ha="center", va="center", fontsize=8, color="#444444")
    ax.add_patch(FancyBboxPatch((0.3, -0.55), 5.6, 0.45, boxstyle="round,pad=0.03",
                                facecolor="#fff4d6", edgecolor="#a07800", lw=1.4))
    ax.text(3.1, -0.325, "include/hedgedb/   the public API (DB, Options, Status, specs, "
            "scores): every room includes it", ha="center", va="center", fontsize=9)
    ax.text(0.3, 5.55, "Who includes whom (arrow: includes; number: #include lines). Blue: "
            "the core, one build library per layer,\nwhich sees only the layers below it that "
            "its CMakeLists.txt names; an include against that does not compile.",
            fontsize=8.5, va="bottom")
    ax.set_xlim(0.2, 6.0)
    ax.set_ylim(-0.7, 6.0)
    ax.axis("off")
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}: {len(edges)} arrows, {sum(edges.values())} include lines")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
