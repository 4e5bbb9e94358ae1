#!/usr/bin/python3
"""Training speed of each CUB/Cars recipe on this machine, as time estimates.

Runs `hedgedb train` for --seconds per recipe on a CUB-layout fixture (the
speed depends on the input size and the network, not on the images) and
prints images per second and what that means for the real data sets: one
epoch of CUB-200-2011's 5,864 training images, of Cars-196's 8,054, and
10,000 iterations at the batch size used.

    /usr/bin/python3 bench/recipe_timing.py --hedgedb build/bin/hedgedb

Recipes (docs/images.md, "Recipes and time"):
  cnn-64        built-in CNN (32/64/500), 64 x 64 inputs
  mlp-64        built-in MLP over the pixels (1024 hidden), 64 x 64
  small-64      scripts/export_backbone.py --arch small, 64 x 64
  resnet18-224  torchvision ResNet-18, 224 x 224 (python3-torchvision)
  resnet50-224  torchvision ResNet-50, 224 x 224 (python3-torchvision)
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

SOURCE = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SOURCE / "tests" / "python"))
from cub_fixture import write_cub  # noqa: E402

CUB_TRAIN, CARS_TRAIN = 5864, 8054
RECIPES = {
    "cnn-64": (64, [], None),
    "mlp-64": (64, ["--arch", "mlp"], None),
    "small-64": (64, [], "small"),
    "resnet18-224": (224, [], "resnet18"),
    "resnet50-224": (224, [], "resnet50"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hedgedb", default=str(SOURCE / "build" / "bin" / "hedgedb"))
    parser.add_argument("--seconds", type=float, default=60, help="training time per recipe")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as work:
        work = pathlib.Path(work)
        root = work / "CUB_200_2011"
        write_cub(root, classes=tuple(range(1, 9)), per_class=20)
        for name in args.recipes.split(","):
            size, extra, arch = RECIPES[name]
            if arch is not None:
                net = work / f"{arch}.pt"
                export = subprocess.run(
                    [sys.executable, str(SOURCE / "scripts" / "export_backbone.py"), "--arch", arch,
                     "--image-size", str(size), "--out", str(net)],
                    capture_output=True, text=True)
                if export.returncode != 0:
                    print(f"{name}: skipped ({export.stderr.strip().splitlines()[-1]})",
                          file=sys.stderr)
                    continue
                extra = extra + ["--backbone", str(net)]
            cmd = [args.hedgedb, "train", "--cub", str(root), "--class-split", "4",
                   "--image-size", str(size), "--method", "hib", "--dim", "64",
                   "--batch-size", str(args.batch_size), "--iterations", "1000000",
                   "--max-seconds", str(args.seconds), "--val-fraction", "0",
                   "--progress-seconds", "1000", "--out", str(work / f"{name}.hdbm")] + extra
            if args.threads > 0:
                cmd += ["--threads", str(args.threads)]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"{name}: {result.stderr.strip()}")
            out = json.loads(result.stdout.strip().splitlines()[-1])
            rate = out["items_per_second"]
            rows.append((name, out["iterations"], rate))
            print(f"{name}: {rate:.1f} images/s", file=sys.stderr)

    print(f"| recipe | iterations in {args.seconds:g} s | images/s | CUB epoch | Cars epoch "
          f"| 10,000 iterations (batch {args.batch_size}) |")
    print("|---|---|---|---|---|---|")
    for name, iterations, rate in rows:
        hours = 10000 * args.batch_size / rate / 3600
        print(f"| {name} | {iterations} | {rate:.1f} | {CUB_TRAIN / rate / 60:.1f} min "
              f"| {CARS_TRAIN / rate / 60:.1f} min | {hours:.1f} h |")


if __name__ == "__main__":
    main()
