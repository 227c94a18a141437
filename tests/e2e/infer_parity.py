#!/usr/bin/env python3
"""Forward parity of dtc-run --infer against onnxruntime on the bundled models.

For every (model, batch size): compile a forward-only plan with dtc-compile (default lowering:
Conv fusion and channels-last layouts; for the convolutional models also once with
--no-fusion --no-channels-last, so both lowerings stay correct), feed the same
seeded random inputs to dtc-run and to onnxruntime (the pip package; one thread each), and
require  max|dtc - ort| <= rtol * max|ort|  for every output (rtol = 1e-4 by default).
Batch sizes include one different from the export's, since plans bind the batch at compile
time. Prints one line per case; exits 1 if any case fails.

Usage: infer_parity.py BUILD_DIR [--models mlp,cnn] [--batches 1,5] [--rtol 1e-4]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Every bundled eval-mode export (the _train exports keep training-mode BatchNormalization, which
# runs in training plans).
DEFAULT_MODELS = ["mlp", "mlp_digits", "cnn", "resnet", "unet", "gpt"]

ORT_TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(bool)": np.bool_}


def random_inputs(session, batch, rng):
    feeds = {}
    for inp in session.get_inputs():
        shape = [batch if (isinstance(d, str) or d is None) else d for d in inp.shape]
        dtype = ORT_TYPES[inp.type]
        if dtype == np.float32:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        elif dtype == np.int64:
            feeds[inp.name] = rng.integers(0, 8, size=shape, dtype=np.int64)
        else:
            feeds[inp.name] = rng.random(shape) < 0.5
    return feeds


PLAIN = ["--no-fusion", "--no-channels-last"]
CONV_MODELS = {"cnn", "resnet", "unet"}


def run_case(build, model, batch, rtol, tmp, flags):
    path = os.path.join(ROOT, "models", model + ".onnx")
    plan = os.path.join(tmp, f"{model}_b{batch}.dtc")
    r = subprocess.run([os.path.join(build, "tools", "dtc-compile"), path, "--inference",
                        "--batch-size", str(batch), "-o", plan] + flags, capture_output=True,
                       text=True)
    if r.returncode != 0:
        return False, "dtc-compile failed: " + r.stderr.strip()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feeds = random_inputs(session, batch, np.random.default_rng(batch * 7919 + len(model)))
    inputs = os.path.join(tmp, "in.npz")
    outputs = os.path.join(tmp, "out.npz")
    np.savez(inputs, **feeds)
    r = subprocess.run([os.path.join(build, "tools", "dtc-run"), plan, "--infer", "--inputs",
                        inputs, "--outputs", outputs, "--threads", "1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return False, "dtc-run failed: " + r.stderr.strip()
    expected = session.run(None, feeds)
    got = np.load(outputs)
    worst = 0.0
    for meta, ref in zip(session.get_outputs(), expected):
        out = got[meta.name]
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return False, f"output {meta.name}: dtc {out.dtype}{out.shape} vs ort {ref.dtype}{ref.shape}"
        scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30)
        err = float(np.max(np.abs(out.astype(np.float64) - ref))) / scale if ref.size else 0.0
        worst = max(worst, err)
    return worst <= rtol, f"max relative error {worst:.2e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--batches", default="1,3,8")
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            for batch in [int(b) for b in args.batches.split(",")]:
                for flags in [[], PLAIN] if model in CONV_MODELS else [[]]:
                    ok, detail = run_case(args.build, model, batch, args.rtol, tmp, flags)
                    label = f"{model} batch={batch}{' ' + ' '.join(flags) if flags else ''}"
                    print(f"{'PASS' if ok else 'FAIL'} {label}: {detail}")
                    failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
