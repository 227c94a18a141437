#!/usr/bin/env python3
"""End-to-end check of the main job: train models/mlp_digits.onnx on the bundled digits set.

Compiles a training plan (softmax cross-entropy, Adam lr 0.01, batch 32), trains 10 epochs with
dtc-run (shuffled, seed 0) and checks that
  - the training loss falls (last epoch < 40% of the first) and validation accuracy ends >= 0.9;
  - the run is reproducible: a second run with the same seed writes byte-identical parameters;
  - the exported model (--export) gives, in onnxruntime, the same logits as dtc-run --infer on
    an inference plan compiled from it (max abs difference < 1e-4), and its validation accuracy
    equals the one dtc-run logged for the last epoch (within one sample).
Usage: train_digits.py --build BUILD_DIR
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stderr}")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    tools = os.path.join(args.build, "tools")
    compile_, run_ = os.path.join(tools, "dtc-compile"), os.path.join(tools, "dtc-run")
    model = os.path.join(ROOT, "models", "mlp_digits.onnx")
    train = os.path.join(ROOT, "models", "data", "digits_train.npz")
    val = os.path.join(ROOT, "models", "data", "digits_val.npz")
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "train.dtc")
        run([compile_, model, "-o", plan, "--loss", "softmax-cross-entropy", "--optimizer", "adam",
             "--lr", "0.01", "--batch-size", "32"])
        outs = []
        for i in range(2):
            log, params = os.path.join(tmp, f"m{i}.jsonl"), os.path.join(tmp, f"p{i}.npz")
            exported = os.path.join(tmp, f"trained{i}.onnx")
            run([run_, plan, "--data", train, "--val-data", val, "--epochs", "10", "--seed", "0",
                 "--threads", "1", "--log", log, "--save-params", params, "--export", exported])
            outs.append((log, params, exported))
        epochs = [e for e in map(json.loads, open(outs[0][0])) if e.get("event") == "epoch"]
        if not epochs:
            sys.exit("FAIL: no per-epoch lines with val_accuracy in the log:\n" + open(outs[0][0]).read()[:2000])
        first, last = epochs[0], epochs[-1]
        loss_key = "train_loss" if "train_loss" in last else "loss"
        print(f"epoch 1: train loss {first[loss_key]:.4f}; epoch {len(epochs)}: train loss "
              f"{last[loss_key]:.4f}, val accuracy {last['val_accuracy']:.4f}")
        failures = []
        if not last[loss_key] < 0.4 * first[loss_key]:
            failures.append("training loss did not fall enough")
        if not last["val_accuracy"] >= 0.9:
            failures.append(f"validation accuracy {last['val_accuracy']} < 0.9")
        a, b = np.load(outs[0][1]), np.load(outs[1][1])
        if sorted(a.files) != sorted(b.files) or any(a[k].tobytes() != b[k].tobytes() for k in a.files):
            failures.append("two runs with the same seed gave different parameters")
        # The export against dtc's own inference of it.
        exported = outs[0][2]
        data = np.load(val)
        x = data["input"]
        sess = ort.InferenceSession(exported, providers=["CPUExecutionProvider"])
        ort_logits = sess.run(None, {"input": x})[0]
        iplan = os.path.join(tmp, "infer.dtc")
        run([compile_, exported, "--inference", "--batch-size", str(len(x)), "-o", iplan])
        np.savez(os.path.join(tmp, "in.npz"), input=x)
        run([run_, iplan, "--infer", "--inputs", os.path.join(tmp, "in.npz"), "--outputs",
             os.path.join(tmp, "out.npz")])
        dtc_logits = np.load(os.path.join(tmp, "out.npz"))["logits"]
        diff = float(np.abs(dtc_logits - ort_logits).max())
        acc = float((ort_logits.argmax(1) == data["label"]).mean())
        print(f"export: onnxruntime vs dtc-run --infer max |diff| {diff:.2e}; onnxruntime "
              f"validation accuracy {acc:.4f}")
        if diff >= 1e-4:
            failures.append(f"exported model: onnxruntime and dtc differ by {diff}")
        # dtc-run's validation uses batches of 32 (dropping the last partial one): compare loosely.
        if abs(acc - last["val_accuracy"]) > 0.02:
            failures.append(f"exported model accuracy {acc} far from the logged {last['val_accuracy']}")
        # The parameters saved and exported are the same numbers.
        import onnx
        from onnx import numpy_helper
        inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(exported).graph.initializer}
        for k in a.files:
            if k in inits and not np.array_equal(inits[k], a[k]):
                failures.append(f"exported initializer {k} differs from --save-params")
        if failures:
            sys.exit("FAIL: " + "; ".join(failures))
    print("train_digits: OK")


if __name__ == "__main__":
    main()
