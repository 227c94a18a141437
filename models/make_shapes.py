#!/usr/bin/env python3
"""Writes a small synthetic segmentation dataset for models/unet_train.onnx (numpy only).

Each sample is a 3x32x32 float32 image: a noisy background of a random colour with one to three
shapes, each a filled axis-aligned square (class 1) or a filled disc (class 2) of a random
colour, size and position (later shapes cover earlier ones). The label is the per-pixel class,
int64[32,32] (0: background), the target of softmax cross-entropy over the UNet's 3 output
channels. Generation is seeded, so re-running writes the same arrays.

Arrays: `input` f32[n,3,32,32], `label` i64[n,32,32].
Usage: python3 models/make_shapes.py [--out DIR] [--train N] [--val N]
       (default: build/data, 1024 training and 256 validation samples)
"""
import argparse
import os

import numpy as np


def make(n, rng):
    x = np.empty((n, 3, 32, 32), np.float32)
    y = np.zeros((n, 32, 32), np.int64)
    yy, xx = np.mgrid[0:32, 0:32]
    for i in range(n):
        bg = rng.uniform(0.0, 0.5, size=(3, 1, 1)).astype(np.float32)
        img = bg + rng.normal(0.0, 0.08, size=(3, 32, 32)).astype(np.float32)
        lab = np.zeros((32, 32), np.int64)
        for _ in range(rng.integers(1, 4)):
            cls = int(rng.integers(1, 3))
            r = int(rng.integers(4, 9))
            cy, cx = rng.integers(r, 32 - r, size=2)
            if cls == 1:
                mask = (np.abs(yy - cy) <= r) & (np.abs(xx - cx) <= r)
            else:
                mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            colour = rng.uniform(0.4, 1.0, size=3).astype(np.float32)
            img[:, mask] = colour[:, None] + rng.normal(0.0, 0.08, size=(3, int(mask.sum())))
            lab[mask] = cls
        x[i] = img
        y[i] = lab
    return x, y


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(here), "build", "data"))
    ap.add_argument("--train", type=int, default=1024)
    ap.add_argument("--val", type=int, default=256)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, n in (("train", args.train), ("val", args.val)):
        x, y = make(n, rng)
        path = os.path.join(args.out, f"shapes_{name}.npz")
        np.savez(path, input=x, label=y)
        print(f"wrote {path}: input {x.shape} label {y.shape}")


if __name__ == "__main__":
    main()
