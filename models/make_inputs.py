#!/usr/bin/env python3
"""Writes the bundled input file of the main job: models/data/cnn_input.npz.

16 synthetic 3x32x32 images (smooth colour gradients plus seeded noise, float32, roughly
zero-mean like normalized CIFAR images) under the name `input`, the CNN's graph input.
Deterministic: re-running writes the same arrays.
"""
import os

import numpy as np


def main():
    rng = np.random.default_rng(20261130)
    n, c, h, w = 16, 3, 32, 32
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    images = np.empty((n, c, h, w), np.float32)
    for i in range(n):
        angle = 2 * np.pi * i / n
        for ch in range(c):
            phase = angle + ch * 2 * np.pi / 3
            images[i, ch] = np.cos(phase) * xx + np.sin(phase) * yy
    images += 0.25 * rng.standard_normal(images.shape).astype(np.float32)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cnn_input.npz")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    np.savez(out, input=images)
    print(f"wrote {out}: input {images.shape} {images.dtype}")


if __name__ == "__main__":
    main()
