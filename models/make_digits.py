#!/usr/bin/env python3
"""Writes the bundled training dataset of the main job: models/data/digits_{train,val}.npz.

The UCI handwritten digits set that ships inside scikit-learn (sklearn.datasets.load_digits:
1797 grey 8x8 images of the digits 0-9, pixel values 0..16; Alpaydin & Kaynak, UCI ML
repository). Pixels are scaled to [0, 1] and flattened to 64 floats (the input of
models/mlp_digits.onnx); labels are int64. A fixed permutation (seed 0) puts 1437 samples in
the training file and 360 in the validation file. Arrays: `input` f32[n,64], `label` i64[n].

Run once with the interpreter that has scikit-learn (Debian's python3-sklearn):
    /usr/bin/python3 models/make_digits.py
Re-running writes the same arrays.
"""
import os

import numpy as np
from sklearn.datasets import load_digits


def main():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    perm = np.random.RandomState(0).permutation(len(x))
    x, y = x[perm], y[perm]
    n_train = 1437
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    os.makedirs(out_dir, exist_ok=True)
    for name, sl in (("train", slice(0, n_train)), ("val", slice(n_train, None))):
        path = os.path.join(out_dir, f"digits_{name}.npz")
        np.savez(path, input=x[sl], label=y[sl])
        print(f"wrote {path}: input {x[sl].shape} label {y[sl].shape}")


if __name__ == "__main__":
    main()
