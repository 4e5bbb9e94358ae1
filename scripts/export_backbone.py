#!/usr/bin/python3
"""Export an image backbone as TorchScript for `hedgedb train --backbone`.

The module maps a [B, 3, S, S] batch (normalised by hedgedb with the training
images' per-channel mean and std) to [B, F] features; hedgedb puts its head
(Gaussian, mixture, codes or point) on top and fine-tunes both.

    /usr/bin/python3 scripts/export_backbone.py --arch resnet50 \\
        --weights resnet50-11ad3fa6.pth --out resnet50.pt
    hedgedb train --cub ROOT --bbox --image-size 224 --backbone resnet50.pt \\
        --method dimco --code-dim 256 --code-k 256 --out model.hdbm

Architectures:
  small      three conv blocks (32-64-128 channels), global average pooling:
             F = 128. Needs only python3-torch; for trying the path quickly.
  resnet18   torchvision ResNet-18 without its classifier: F = 512.
  resnet50   torchvision ResNet-50 without its classifier: F = 2048.
             (python3-torchvision.)

--weights loads a state dict (for example ImageNet weights downloaded from
torchvision's model zoo on a machine with internet access). Without it the
ResNets start from random weights, which learn little of CUB or Cars on a CPU:
the published numbers all start from ImageNet weights.
"""

import argparse
import sys

import torch
from torch import nn


class SmallBackbone(nn.Module):
    """Three conv-BN-ReLU-pool blocks and global average pooling."""

    def __init__(self):
        super().__init__()
        layers = []
        channels = 3
        for width in (32, 64, 128):
            layers += [
                nn.Conv2d(channels, width, 3, padding=1),
                nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ]
            channels = width
        self.features = nn.Sequential(*layers)

    def forward(self, x):
        return torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1)


def build(arch):
    if arch == "small":
        return SmallBackbone(), 128
    import torchvision  # only the ResNets need it

    net = getattr(torchvision.models, arch)(weights=None)
    features = net.fc.in_features
    net.fc = nn.Identity()
    return net, features


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=["small", "resnet18", "resnet50"], default="small")
    parser.add_argument("--weights", help="state dict (.pth) to load before export")
    parser.add_argument("--image-size", type=int, default=64,
                        help="side S of the test batch that checks the export (train's --image-size)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random initial weights")
    parser.add_argument("--out", required=True, help="TorchScript file to write")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    net, features = build(args.arch)
    if args.weights:
        state = torch.load(args.weights, map_location="cpu")
        # Classifier weights have no place once fc is gone.
        state = {k: v for k, v in state.items() if not k.startswith("fc.")}
        missing, unexpected = net.load_state_dict(state, strict=False)
        if missing or unexpected:
            sys.exit(f"export_backbone: {args.weights} does not fit {args.arch}: "
                     f"missing {missing[:3]}, unexpected {unexpected[:3]}")
    elif args.arch != "small":
        print(f"export_backbone: {args.arch} starts from random weights (no --weights)",
              file=sys.stderr)
    scripted = torch.jit.script(net)
    # The export must take hedgedb's batches: [B, 3, S, S] -> [B, F].
    scripted.eval()
    with torch.no_grad():
        out = scripted(torch.zeros(2, 3, args.image_size, args.image_size))
    if tuple(out.shape) != (2, features):
        sys.exit(f"export_backbone: expected output [2, {features}], got {list(out.shape)}")
    scripted.save(args.out)
    print(f'{{"out": "{args.out}", "arch": "{args.arch}", "features": {features}, '
          f'"weights": "{args.weights or "random"}"}}')


if __name__ == "__main__":
    main()
