#!/usr/bin/python3
# Mixed-precision benchmark: one dtc training step with --precision bf16 against fp32 (same
# model, batch, threads, data and optimizer as tools/bench/train_bench.py: SGD lr 0.01), and the
# cost of --loss-scale dynamic on top of bf16; prints the fastest step time after --warmup steps
# over --rounds runs of each configuration, interleaved (the minimum, not the median: on a
# shared machine other load only ever adds time), and the ratios (fp32 / bf16 > 1: bf16 is
# faster).
#
#     /usr/bin/python3 tools/bench/amp_bench.py [--build build] [--models cnn,gpt]
#         [--batch 32] [--threads 1] [--steps 30] [--warmup 5] [--rounds 3]
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_bench import BATCHES_IN_DATA, MODELS, REPO, last_line, make_data  # noqa: E402


def step_ms(args, model, batch, data_path, tmp, extra):
    """Step times in ms of dtc with `extra` compile flags, or an error string."""
    onnx, flags, _ = MODELS[model]
    plan = os.path.join(tmp, model + ".dtc")
    r = subprocess.run([os.path.join(args.build, "tools", "dtc-compile"),
                        os.path.join(REPO, "models", onnx), "-o", plan, "--strategy", "single",
                        "--optimizer", "sgd", "--lr", "0.01", "--batch-size", str(batch),
                        *flags, *extra], capture_output=True, text=True)
    if r.returncode != 0:
        return "dtc-compile: " + last_line(r.stderr)
    log = os.path.join(tmp, model + ".jsonl")
    r = subprocess.run([os.path.join(args.build, "tools", "dtc-run"), plan, "--data", data_path,
                        "--steps", str(args.warmup + args.steps), "--no-shuffle", "--threads",
                        str(args.threads), "--log", log], capture_output=True, text=True)
    if r.returncode != 0:
        return "dtc-run: " + last_line(r.stderr)
    times = []
    with open(log) as f:
        for line in f:
            j = json.loads(line)
            if j.get("event") == "step" and j["step"] >= args.warmup:
                times.append(batch / j["samples_per_s"] * 1e3)
    return times


def main():
    ap = argparse.ArgumentParser(description="dtc training step: bf16 against fp32")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default="cnn,gpt")
    ap.add_argument("--batch", type=int, default=0, help="default: train_bench's (32)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    configs = [("fp32", []), ("bf16", ["--precision", "bf16"]),
               ("bf16+ls", ["--precision", "bf16", "--loss-scale", "dynamic"])]
    print("ms/step: fastest of --steps steps after --warmup, over --rounds interleaved runs "
          "(forward + loss + backward + SGD)")
    print(f"{'model':7} {'batch':>5} {'thr':>3} " +
          " ".join(f"{name + ' ms':>11}" for name, _ in configs) +
          f" {'fp32/bf16':>9} {'bf16/bf16+ls':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            if model not in MODELS:
                sys.exit(f"unknown model '{model}' (known: {', '.join(MODELS)})")
            batch = args.batch or MODELS[model][2]
            data_path = os.path.join(tmp, model + ".npz")
            rng = np.random.default_rng(list(MODELS).index(model))
            np.savez(data_path, **make_data(model, batch * BATCHES_IN_DATA, rng))
            times = [[] for _ in configs]
            errors = []
            for _ in range(args.rounds):
                for c, (_, extra) in enumerate(configs):
                    t = step_ms(args, model, batch, data_path, tmp, extra)
                    if isinstance(t, str):
                        errors.append(t)
                    else:
                        times[c] += t
            ms = [min(t) if t else 0.0 for t in times]
            if errors:
                print(f"{model:7} {batch:5} {args.threads:3}  " + "; ".join(errors))
                continue
            print(f"{model:7} {batch:5} {args.threads:3} " +
                  " ".join(f"{m:11.3f}" for m in ms) +
                  f" {ms[0] / ms[1]:9.2f} {ms[1] / ms[2]:12.2f}")


if __name__ == "__main__":
    main()
