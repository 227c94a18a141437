#!/usr/bin/env python3
"""Validation accuracy of asynchronous parameter-server training against single-device training.

For each model (the digits MLP; the CNN on the digits as 3x32x32 images) and optimizer (Adam;
SGD with momentum 0.9), trains single-device, ps=2:3 synchronous ("sync": --staleness 0, dp's
law) and ps=2:3 asynchronous under each --async-rule, --runs times each (the data order differs
between runs: --seed is the run's index), and prints the last epoch's validation accuracy as
min-max over the runs (the README's parameter-server table).

Usage: ps_accuracy.py --build BUILD_DIR [--runs 3] [--only mlp,cnn] [--optimizers adam,sgd]
                      [--rules sync,aggregate,scaled,staleness-lr] [--ps-flags '--momentum 0.5']
                      [--epochs mlp=3,cnn=20]

The CNN's default, 20 epochs, trains it close to convergence: after 6 epochs (still far from
it) every asynchronous rule lagged single-device training, which measured how much more slowly
asynchrony converges rather than where it ends.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "e2e"))
from dp_train import MODELS, Runner  # noqa: E402
from ps_train import DIGITS, DIGITS_VAL, MLP, digit_images, val_accuracy  # noqa: E402

CASES = {
    # name: model, epochs, optimizer flags
    ("mlp", "adam"): (MLP, 3, ["--batch-size", "24", "--optimizer", "adam", "--lr", "0.01"]),
    ("mlp", "sgd"): (MLP, 3, ["--batch-size", "24", "--optimizer", "sgd", "--lr", "0.05",
                              "--momentum", "0.9"]),
    ("cnn", "adam"): (os.path.join(MODELS, "cnn_train.onnx"), 20,
                      ["--batch-size", "48", "--optimizer", "adam", "--lr", "0.01"]),
    ("cnn", "sgd"): (os.path.join(MODELS, "cnn_train.onnx"), 20,
                     ["--batch-size", "48", "--optimizer", "sgd", "--lr", "0.1",
                      "--momentum", "0.9"]),
}


def override(flags, extra):
    """`flags` (pairs of option and value) with the options that `extra` names replaced."""
    keep = []
    for i in range(0, len(flags), 2):
        if flags[i] not in extra[0::2]:
            keep += flags[i:i + 2]
    return keep + extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="mlp,cnn")
    ap.add_argument("--optimizers", default="adam,sgd")
    ap.add_argument("--rules", default="sync,scaled,aggregate,staleness-lr")
    ap.add_argument("--strategy", default="ps=2:3")
    ap.add_argument("--ps-flags", default="",
                    help="extra dtc-compile flags for the ps plans (space-separated), e.g. "
                         "'--momentum 0.5'")
    ap.add_argument("--epochs", default="",
                    help="epochs per model, e.g. mlp=3,cnn=6 (default: mlp 3, cnn 20)")
    args = ap.parse_args()
    epochs_of = dict((kv.split("=")[0], int(kv.split("=")[1]))
                     for kv in args.epochs.split(",") if kv)
    tmp = tempfile.mkdtemp(prefix="dtc-psacc-")
    r = Runner(args.build, tmp)
    try:
        data = {"mlp": (DIGITS, DIGITS_VAL),
                "cnn": (digit_images(DIGITS, r.unique("img", ".npz")),
                        digit_images(DIGITS_VAL, r.unique("img_val", ".npz")))}
        print(f"| model | optimizer | strategy | accuracy (min-max of {args.runs}) | s/run |")
        print("|---|---|---|---|---|")
        for model_name in args.only.split(","):
            for opt in args.optimizers.split(","):
                model, epochs, flags = CASES[(model_name, opt)]
                epochs = epochs_of.get(model_name, epochs)
                train, val = data[model_name]
                variants = [("single", ["--strategy", "single"], [])]
                variants += [(f"{args.strategy} {rule} {args.ps_flags}".strip(),
                              ["--strategy", args.strategy] +
                              (["--staleness", "0"] if rule == "sync" else
                               ["--async-rule", rule]),
                              ["--local-cluster"]) for rule in args.rules.split(",")]
                ps_flags = args.ps_flags.split()
                for name, cflags, rflags in variants:
                    plan = r.compile(model, cflags + override(flags, ps_flags if rflags else []))
                    accs, t0 = [], time.time()
                    for run in range(args.runs):
                        _, rows = r.train(plan, train, 0,
                                          ["--epochs", str(epochs), "--val-data", val,
                                           "--seed", str(run)] + rflags)
                        accs.append(val_accuracy(rows))
                    print(f"| {model_name} | {opt} | {name} | {min(accs):.3f}-{max(accs):.3f} "
                          f"({', '.join(f'{a:.3f}' for a in accs)}) | "
                          f"{(time.time() - t0) / args.runs:.0f} |", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
