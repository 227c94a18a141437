#!/usr/bin/env python3
# Inference benchmark: dtc-run --infer against onnxruntime (CPU execution provider) on the
# bundled eval-mode models, same thread count, same inputs, measured in the same run. dtc's latency is
# dtc-run's own timing of `--repeat` forward passes after `--warmup` (plan loading excluded);
# onnxruntime's is session.run timed in this process after the same warm-up. Prints latency,
# throughput (samples/s) and the ratios ort_latency / dtc_latency and torch_latency /
# dtc_latency (>1: dtc faster), then the
# memory plan of every bundled model: arena bytes against the no-reuse total.
#
#     python3 tools/bench/infer_bench.py --build build [--models mlp,cnn,resnet]
#         [--batches 1,32] [--threads 1,2] [--repeat 200]
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Eval-mode exports (the _train ones keep training-mode BatchNormalization: training plans).
ALL_MODELS = ["mlp", "mlp_digits", "cnn", "resnet", "unet", "gpt"]


def ort_latency(path, feeds, threads, warmup, repeat):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


TORCH_PY = "/usr/bin/python3"
# Runs under Debian's python3 (torch 1.13): prints the median forward latency in seconds.
TORCH_CHILD = r"""
import sys, time, statistics
sys.path.insert(0, sys.argv[1])
import torch
import export_models
name, batch, threads, warmup, repeat = sys.argv[2], *map(int, sys.argv[3:7])
torch.set_num_threads(threads)
torch.manual_seed(0)
ctor, make_input, _, _, _ = export_models.model_specs()[name]
model = ctor().eval()
x = make_input()
x = x.repeat(batch, *([1] * (x.dim() - 1)))[:batch] if x.shape[0] < batch else x[:batch]
with torch.no_grad():
    for _ in range(warmup):
        model(x)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        model(x)
        times.append(time.perf_counter() - t0)
print(statistics.median(times))
"""


def torch_latency(model, batch, threads, warmup, repeat):
    """Median PyTorch eager latency, or None when torch is not installed there."""
    if not os.path.exists(TORCH_PY):
        return None
    r = subprocess.run([TORCH_PY, "-c", TORCH_CHILD, os.path.join(REPO, "models"), model,
                        str(batch), str(threads), str(warmup), str(repeat)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return float(r.stdout.strip())


def dtc_latency(build, plan, inputs, threads, warmup, repeat):
    r = subprocess.run([os.path.join(build, "tools", "dtc-run"), plan, "--infer", "--inputs",
                        inputs, "--threads", str(threads), "--warmup", str(warmup), "--repeat",
                        str(repeat)], capture_output=True, text=True, check=True)
    m = re.search(r"median ([0-9.]+) ms", r.stderr)
    return float(m.group(1)) / 1e3


def compile_plan(build, model_path, batch, plan):
    r = subprocess.run([os.path.join(build, "tools", "dtc-compile"), model_path, "--inference",
                        "--batch-size", str(batch), "-o", plan], capture_output=True, text=True)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default="mlp,cnn,resnet,unet,gpt")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("latency: median over --repeat forward passes after --warmup, per batch, in ms;")
    print("ratios: peer latency / dtc latency (> 1: dtc is faster); thr = threads for all three")
    print(f"{'model':12} {'batch':>5} {'thr':>3} {'dtc ms':>9} {'ort ms':>9} {'torch ms':>9} "
          f"{'dtc samples/s':>14} {'ort samples/s':>14} {'ort/dtc':>8} {'torch/dtc':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            path = os.path.join(REPO, "models", model + ".onnx")
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            for batch in [int(b) for b in args.batches.split(",")]:
                feeds = {}
                for i in sess.get_inputs():
                    shape = [batch if isinstance(d, str) or d is None else d for d in i.shape]
                    if i.type == "tensor(int64)":  # token ids
                        feeds[i.name] = rng.integers(0, 8, size=shape, dtype=np.int64)
                    else:
                        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
                plan = os.path.join(tmp, f"{model}.dtc")
                r = compile_plan(args.build, path, batch, plan)
                if r.returncode != 0:
                    print(f"{model:12} {batch:5}  dtc cannot compile: {r.stderr.strip()}")
                    continue
                inputs = os.path.join(tmp, "in.npz")
                np.savez(inputs, **feeds)
                for threads in [int(t) for t in args.threads.split(",")]:
                    d = dtc_latency(args.build, plan, inputs, threads, args.warmup, args.repeat)
                    o = ort_latency(path, feeds, threads, args.warmup, args.repeat)
                    t = torch_latency(model, batch, threads, args.warmup, args.repeat)
                    ts = f"{t * 1e3:9.3f}" if t else f"{'n/a':>9}"
                    tr = f"{t / d:9.2f}" if t else f"{'n/a':>9}"
                    print(f"{model:12} {batch:5} {threads:3} {d * 1e3:9.3f} {o * 1e3:9.3f} {ts} "
                          f"{batch / d:14.0f} {batch / o:14.0f} {o / d:8.2f} {tr}")
        print()
        print("memory plan at batch 32: arena bytes / bytes without reuse; the same for the")
        print("activations alone (arena minus weights, constants and inputs, which never share)")
        for model in ALL_MODELS:
            path = os.path.join(REPO, "models", model + ".onnx")
            r = subprocess.run([os.path.join(args.build, "tools", "dtc-compile"), path,
                                "--inference", "--batch-size", "32", "--emit", "plan-text"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                reason = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "?"
                print(f"  {model:12} n/a: {reason}")
                continue
            m = re.search(r"arena=(\d+) no_reuse=(\d+)", r.stdout)
            arena, total = int(m.group(1)), int(m.group(2))
            fixed = 0
            for b in re.finditer(r'^  buffer %\d+ ".*" (param|constant|input) \S+ @\d+\+(\d+)',
                                 r.stdout, re.M):
                fixed += (int(b.group(2)) + 63) // 64 * 64
            act, act_total = arena - fixed, total - fixed
            print(f"  {model:12} {arena:>10} / {total:>10} = {arena / total:.2f}   "
                  f"activations {act:>9} / {act_total:>9} = {act / max(act_total, 1):.2f}")


if __name__ == "__main__":
    main()
