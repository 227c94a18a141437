#!/usr/bin/env python3
# GPU training benchmark: one dtc training step on CUDA (dtc-compile --device cuda, dtc-run --data)
# against the same step in PyTorch CUDA eager (forward, CrossEntropyLoss, backward, SGD step) on
# the same GPU, batch, data, initial weights and optimizer (SGD lr 0.01), fp32 without TF32 on
# both sides (dtc's cuBLAS math mode is CUBLAS_DEFAULT_MATH); prints the median step time after
# --warmup steps and the ratio torch/dtc (> 1: dtc is faster). Both sides copy each batch from
# host memory and read the loss back every step. Without a PyTorch that sees a GPU (tried:
# --torch-python, else this interpreter, else /usr/bin/python3) it prints dtc's figures and says
# why. Without a GPU for dtc it says so and exits 0.
#
#     tools/bench/gpu_step_bench.py [--build build] [--models resnet,unet,gpt] [--batch N]
#         [--steps 30] [--warmup 5] [--torch-python PYTHON]
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_bench import make_data  # noqa: E402  (the CPU benchmark's synthetic data)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES_IN_DATA = 4  # the data file holds this many batches, visited in order (both sides)

# name -> (onnx file, extra dtc-compile flags, default batch)
MODELS = {
    "resnet": ("resnet_train.onnx", [], 64),
    "unet": ("unet_train.onnx", [], 16),
    "gpt": ("gpt_train.onnx", ["--class-axis", "-1"], 64),
}

# The PyTorch side, in its own process. argv: models dir, model, data .npz, batch, warmup, steps.
# Prints one JSON object: the step times (s) after the warm-up and the first step's loss.
TORCH_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
import export_models
name, path = sys.argv[2], sys.argv[3]
batch, warmup, steps = map(int, sys.argv[4:7])
torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as dtc computes it
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True  # cuDNN's algorithm search, as dtc chooses once per shape
torch.manual_seed(0)  # export_models seeds 0 too: the same initial weights as the .onnx file
dev = torch.device("cuda")
model = export_models.model_specs()[name][0]().train().to(dev)
data = np.load(path)
x_all = torch.from_numpy(data["tokens" if name == "gpt" else "input"]).pin_memory()
y_all = torch.from_numpy(data["label"]).pin_memory()
batches = x_all.shape[0] // batch
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()

def step(i):
    b = i % batches
    x = x_all[b * batch:(b + 1) * batch].to(dev, non_blocking=True)
    y = y_all[b * batch:(b + 1) * batch].to(dev, non_blocking=True)
    logits = model(x)
    if name == "gpt":  # (N,T,V) scores, class axis -1
        logits, y = logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
    loss = loss_fn(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()  # synchronizes, as dtc reads its loss every step

times, loss0 = [], None
for i in range(warmup + steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = step(i)
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    if i == 0:
        loss0 = loss
    if i >= warmup:
        times.append(t)
print(json.dumps({"times": times, "loss0": loss0, "gpu": torch.cuda.get_device_name(0),
                  "torch": torch.__version__}))
"""

PROBE = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "?"


def find_torch(requested):
    """(python, None) for an interpreter whose torch sees a GPU, else (None, why not)."""
    candidates = [requested] if requested else [sys.executable, "/usr/bin/python3"]
    reasons = []
    for py in dict.fromkeys(candidates):
        if not os.path.exists(py):
            reasons.append(f"{py}: not found")
            continue
        r = subprocess.run([py, "-c", PROBE], capture_output=True, text=True)
        if r.returncode == 0:
            return py, None
        reasons.append(f"{py}: " + ("torch.cuda.is_available() is False" if r.returncode == 3
                                    else "cannot import torch (" + last_line(r.stderr) + ")"))
    return None, "; ".join(reasons)


def bench_dtc(args, model, batch, data_path, tmp):
    """Median step time (s) and first loss; or an error string."""
    onnx, flags, _ = MODELS[model]
    plan = os.path.join(tmp, model + ".dtc")
    r = subprocess.run([os.path.join(args.build, "tools", "dtc-compile"),
                        os.path.join(REPO, "models", onnx), "-o", plan, "--device", "cuda",
                        "--strategy", "single", "--loss", "softmax-cross-entropy", "--optimizer",
                        "sgd", "--lr", "0.01", "--batch-size", str(batch), *flags],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "dtc-compile: " + last_line(r.stderr)
    log = os.path.join(tmp, model + ".jsonl")
    r = subprocess.run([os.path.join(args.build, "tools", "dtc-run"), plan, "--data", data_path,
                        "--steps", str(args.warmup + args.steps), "--no-shuffle", "--quiet",
                        "--log", log], capture_output=True, text=True)
    if r.returncode != 0:
        return "dtc-run: " + last_line(r.stderr)
    # Step lines hold samples/s of that step, timed by the trainer around one whole step (batch
    # upload, forward, backward, optimizer, loss download): its time is batch / samples_per_s.
    times, loss0 = [], None
    with open(log) as f:
        for line in f:
            j = json.loads(line)
            if j.get("event") != "step":
                continue
            if j["step"] == 0:
                loss0 = j["loss"]
            if j["step"] >= args.warmup:
                times.append(batch / j["samples_per_s"])
    return statistics.median(times), loss0


def bench_torch(args, py, model, batch, data_path):
    r = subprocess.run([py, "-c", TORCH_CHILD, os.path.join(REPO, "models"), model, data_path,
                        str(batch), str(args.warmup), str(args.steps)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "torch: " + last_line(r.stderr)
    j = json.loads(last_line(r.stdout))
    return statistics.median(j["times"]), j["loss0"], j["gpu"], j["torch"]


def gpu_reason(args, tmp):
    """None when dtc-run runs CUDA plans here, else dtc-run's reason."""
    src = os.path.join(tmp, "probe.onnxtxt")
    with open(src, "w") as f:
        f.write('<ir_version: 8, opset_import: ["" : 13]>\n'
                'agraph (float[N, 4] x) => (float[N, 4] y) {\n  y = Identity(x)\n}\n')
    plan = os.path.join(tmp, "probe.dtc")
    r = subprocess.run([os.path.join(args.build, "tools", "dtc-compile"), src, "--inference",
                        "--batch-size", "1", "--device", "cuda", "-o", plan],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "dtc-compile: " + last_line(r.stderr)
    np.savez(os.path.join(tmp, "probe.npz"), x=np.zeros((1, 4), np.float32))
    r = subprocess.run([os.path.join(args.build, "tools", "dtc-run"), plan, "--infer",
                        "--inputs", os.path.join(tmp, "probe.npz")], capture_output=True, text=True)
    return None if r.returncode == 0 else last_line(r.stderr)


def main():
    ap = argparse.ArgumentParser(description="dtc on CUDA vs PyTorch CUDA eager: step time")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=0, help="default: resnet 64, unet 16, gpt 64")
    ap.add_argument("--torch-python", default="",
                    help="interpreter with a CUDA PyTorch (default: this one, then /usr/bin/python3)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        sys.exit("--steps must be >= 1 and --warmup >= 0")
    for m in args.models.split(","):
        if m not in MODELS:
            sys.exit(f"unknown model '{m}' (known: {', '.join(MODELS)})")
    with tempfile.TemporaryDirectory() as tmp:
        why = gpu_reason(args, tmp)
        if why:
            print(f"gpu_step_bench: no GPU for dtc, nothing measured ({why})")
            return 0
        py, no_torch = find_torch(args.torch_python)
        print("ms/step: median over --steps steps after --warmup (batch upload + forward + loss + "
              "backward + SGD + loss read), fp32, no TF32")
        print("torch/dtc: PyTorch CUDA eager time / dtc time (> 1: dtc is faster)")
        if no_torch:
            print(f"PyTorch CUDA eager not measured: {no_torch}")
        print(f"{'model':7} {'batch':>5} {'dtc ms':>8} {'torch ms':>8} {'torch/dtc':>9} "
              f"{'loss0 dtc / torch':>21}")
        info = None
        for model in args.models.split(","):
            batch = args.batch or MODELS[model][2]
            data_path = os.path.join(tmp, model + ".npz")
            rng = np.random.default_rng(list(MODELS).index(model))
            np.savez(data_path, **make_data(model, batch * BATCHES_IN_DATA, rng))
            d = bench_dtc(args, model, batch, data_path, tmp)
            t = bench_torch(args, py, model, batch, data_path) if py else None
            na = "n/a"
            d_ms = f"{d[0] * 1e3:8.3f}" if not isinstance(d, str) else f"{na:>8}"
            d_loss = f"{d[1]:10.5f}" if not isinstance(d, str) else f"{na:>10}"
            if t is None or isinstance(t, str):
                t_ms, ratio, t_loss = f"{na:>8}", f"{na:>9}", f"{na:>10}"
            else:
                t_ms, t_loss = f"{t[0] * 1e3:8.3f}", f"{t[1]:10.5f}"
                ratio = f"{t[0] / d[0]:9.2f}" if not isinstance(d, str) else f"{na:>9}"
                info = (t[2], t[3])
            print(f"{model:7} {batch:5} {d_ms} {t_ms} {ratio} {d_loss} {t_loss}")
            for e in (d, t):
                if isinstance(e, str):
                    print(f"        {e}")
        if info:
            print(f"GPU: {info[0]}; PyTorch {info[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
