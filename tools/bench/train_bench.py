#!/usr/bin/python3
# Training benchmark: one dtc training step (dtc-compile --strategy single, dtc-run --data) against
# the same step in PyTorch eager on CPU (forward, CrossEntropyLoss, backward, SGD step), same
# batch, threads, data, weights and optimizer (SGD lr 0.01, no momentum); prints the median step
# time after --warmup steps and the peak memory of both (see tools/bench/TRAINING.md).
#
#     /usr/bin/python3 tools/bench/train_bench.py [--build build] [--models mlp,cnn,...]
#         [--batch 32] [--threads 1] [--steps 30] [--warmup 5] [--torch-python /usr/bin/python3]
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLAS_SEEN = set()  # BLAS libraries the torch children mapped
BATCHES_IN_DATA = 4  # the data file holds this many batches, visited in order (both sides)

# name -> (onnx file, extra dtc-compile flags, default batch)
MODELS = {
    "mlp": ("mlp.onnx", [], 32),
    "cnn": ("cnn_train.onnx", [], 32),
    "resnet": ("resnet_train.onnx", [], 32),
    "unet": ("unet_train.onnx", [], 8),
    "gpt": ("gpt_train.onnx", ["--class-axis", "-1"], 32),
}


def make_data(model, n, rng):
    """Random inputs and labels for n samples, named as the plan's data inputs ("label")."""
    if model == "mlp":
        return {"input": rng.standard_normal((n, 784)).astype(np.float32),
                "label": rng.integers(0, 10, n).astype(np.int64)}
    if model in ("cnn", "resnet"):
        return {"input": rng.standard_normal((n, 3, 32, 32)).astype(np.float32),
                "label": rng.integers(0, 10, n).astype(np.int64)}
    if model == "unet":
        return {"input": rng.standard_normal((n, 3, 32, 32)).astype(np.float32),
                "label": rng.integers(0, 3, (n, 32, 32)).astype(np.int64)}
    if model == "gpt":
        return {"tokens": rng.integers(0, 64, (n, 16)).astype(np.int64),
                "label": rng.integers(0, 64, (n, 16)).astype(np.int64)}
    raise ValueError(model)


# The PyTorch side, run in its own process (for its peak RSS). argv: models dir, model, data .npz,
# batch, threads, warmup, steps. Prints one JSON object: step times (s) after the warm-up, the
# first step's loss, the RSS before the first step and the tensor bytes of one step.
TORCH_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
import export_models
name, path = sys.argv[2], sys.argv[3]
batch, threads, warmup, steps = map(int, sys.argv[4:8])
torch.set_num_threads(threads)
torch.set_num_interop_threads(1)
torch.manual_seed(0)  # export_models seeds 0 too: the same initial weights as the .onnx file
model = export_models.model_specs()[name][0]().train()
data = np.load(path)
x_all = torch.from_numpy(data["tokens" if name == "gpt" else "input"])
y_all = torch.from_numpy(data["label"])
batches = x_all.shape[0] // batch
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()

def step(i):
    b = i % batches
    x, y = x_all[b * batch:(b + 1) * batch], y_all[b * batch:(b + 1) * batch]
    logits = model(x)
    if name == "gpt":  # (N,T,V) scores, class axis -1
        logits, y = logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
    loss = loss_fn(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()

def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

base_rss = rss_mb()
times, loss0 = [], None
for i in range(warmup + steps):
    t0 = time.perf_counter()
    loss = step(i)
    t = time.perf_counter() - t0
    if i == 0:
        loss0 = loss
    if i >= warmup:
        times.append(t)

# One more, untimed step with a saved-tensor hook: the unique storages autograd keeps for the
# backward (activations; parameters excluded), besides the parameters and their gradients.
param_ptrs = {p.data_ptr() for p in model.parameters()}
saved = {}
def pack(t):
    s = t.storage()
    if s.data_ptr() not in param_ptrs:
        saved[s.data_ptr()] = s.size() * t.element_size()
    return t
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    step(warmup + steps)
param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
batch_bytes = (x_all[:batch].numel() * x_all.element_size()
               + y_all[:batch].numel() * y_all.element_size())
# The BLAS torch's Linear/MatMul run on (Debian's torch: whatever libblas.so.3 resolves to).
with open("/proc/self/maps") as f:
    blas = sorted({l.split()[-1] for l in f if "blas" in l.split()[-1].lower()})
print(json.dumps({"times": times, "loss0": loss0, "base_rss_mb": base_rss,
                  "tensor_bytes": 2 * param_bytes + sum(saved.values()) + batch_bytes,
                  "blas": [os.path.realpath(b) for b in blas]}))
"""


def run_measured(cmd, tmp):
    """Runs cmd; returns (returncode, stdout, stderr, peak RSS in MB of that process)."""
    out_path, err_path = os.path.join(tmp, "child.out"), os.path.join(tmp, "child.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
    with open(out_path) as out, open(err_path) as err:
        return p.returncode, out.read(), err.read(), usage.ru_maxrss / 1024  # Linux: KiB


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "?"


def bench_dtc(args, model, batch, data_path, tmp):
    """Median step time (s), peak RSS (MB), arena bytes and first loss; or an error string."""
    onnx, flags, _ = MODELS[model]
    plan = os.path.join(tmp, model + ".dtc")
    r = subprocess.run([os.path.join(args.build, "tools", "dtc-compile"),
                        os.path.join(REPO, "models", onnx), "-o", plan, "--strategy", "single",
                        "--loss", "softmax-cross-entropy", "--optimizer", "sgd", "--lr", "0.01",
                        "--batch-size", str(batch), *flags], capture_output=True, text=True)
    if r.returncode != 0:
        return "dtc-compile: " + last_line(r.stderr)
    m = re.search(r"arena (\d+) bytes", r.stderr)
    arena = int(m.group(1)) if m else None
    log = os.path.join(tmp, model + ".jsonl")
    rc, _, err, rss = run_measured(
        [os.path.join(args.build, "tools", "dtc-run"), plan, "--data", data_path, "--steps",
         str(args.warmup + args.steps), "--no-shuffle", "--threads", str(args.threads), "--log",
         log], tmp)
    if rc != 0:
        return "dtc-run: " + last_line(err)
    # Step lines hold samples/s of that step, timed by the trainer around one whole step
    # (batch copy-in, forward, backward, optimizer): its time is batch / samples_per_s.
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
    return statistics.median(times), rss, arena, loss0


def bench_torch(args, model, batch, data_path, tmp):
    """Median step time (s), peak RSS (MB), tensor bytes, first loss; or an error string."""
    if not os.path.exists(args.torch_python):
        return "no " + args.torch_python
    rc, out, err, rss = run_measured(
        [args.torch_python, "-c", TORCH_CHILD, os.path.join(REPO, "models"), model, data_path,
         str(batch), str(args.threads), str(args.warmup), str(args.steps)], tmp)
    if rc != 0:
        return "torch: " + last_line(err)
    j = json.loads(last_line(out))
    for b in j["blas"]:
        BLAS_SEEN.add(b)
    return statistics.median(j["times"]), rss, j["tensor_bytes"], j["loss0"], j["base_rss_mb"]


def main():
    ap = argparse.ArgumentParser(
        description="dtc vs PyTorch eager CPU: training step time and peak memory")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=0, help="default: 32 (unet: 8)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--torch-python", default="/usr/bin/python3",
                    help="interpreter with torch (default: Debian's, torch 1.13)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        sys.exit("--steps must be >= 1 and --warmup >= 0")
    for m in args.models.split(","):
        if m not in MODELS:
            sys.exit(f"unknown model '{m}' (known: {', '.join(MODELS)})")
    print("ms/step: median over --steps steps after --warmup (forward + loss + backward + SGD)")
    print("torch/dtc: torch time / dtc time (> 1: dtc is faster); RSS: peak resident set of the")
    print("process (torch's includes ~its libraries; 'torch base': its RSS before the first step)")
    print("arena: dtc's one allocation; torch tensors: params + grads + saved activations + batch")
    print("loss0: first-step loss, dtc vs torch (same weights and data: should agree)")
    print(f"{'model':7} {'batch':>5} {'thr':>3} {'dtc ms':>8} {'torch ms':>8} {'torch/dtc':>9} "
          f"{'dtc RSS':>8} {'torch RSS':>9} {'ratio':>6} {'torch base':>10} {'dtc arena':>9} "
          f"{'torch tensors':>13} {'loss0 dtc / torch':>21}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            batch = args.batch or MODELS[model][2]
            data_path = os.path.join(tmp, model + ".npz")
            rng = np.random.default_rng(list(MODELS).index(model))  # whatever --models holds
            np.savez(data_path, **make_data(model, batch * BATCHES_IN_DATA, rng))
            d = bench_dtc(args, model, batch, data_path, tmp)
            t = bench_torch(args, model, batch, data_path, tmp)
            head = f"{model:7} {batch:5} {args.threads:3}"
            if isinstance(d, str) and isinstance(t, str):
                print(f"{head}  {d}; {t}")
                continue
            na = "n/a"
            if isinstance(d, str):  # PyTorch's side alone, then why dtc has none
                t_s, t_rss, t_bytes, t_loss, t_base = t
                print(f"{head} {na:>8} {t_s * 1e3:8.3f} {na:>9} {na:>8} {t_rss:9.1f} {na:>6} "
                      f"{t_base:10.1f} {na:>9} {t_bytes / 2**20:13.2f} {na:>10} {t_loss:10.5f}")
                print(f"        {d}")
                continue
            if isinstance(t, str):
                d_s, d_rss, arena, d_loss = d
                print(f"{head} {d_s * 1e3:8.3f} {na:>8} {na:>9} {d_rss:8.1f} {na:>9} {na:>6} "
                      f"{na:>10} {arena / 2**20 if arena else 0:9.2f} {na:>13} {d_loss:10.5f}")
                print(f"        {t}")
                continue
            d_s, d_rss, arena, d_loss = d
            t_s, t_rss, t_bytes, t_loss, t_base = t
            arena_mb = f"{arena / 2**20:9.2f}" if arena else f"{'?':>9}"
            print(f"{head} {d_s * 1e3:8.3f} {t_s * 1e3:8.3f} {t_s / d_s:9.2f} {d_rss:8.1f} "
                  f"{t_rss:9.1f} {t_rss / d_rss:6.2f} {t_base:10.1f} {arena_mb} "
                  f"{t_bytes / 2**20:13.2f} {d_loss:10.5f} {t_loss:10.5f}")
    print("(memory in MB = 2^20 bytes; ratio = torch RSS / dtc RSS)")
    if BLAS_SEEN:
        print("torch's BLAS: " + ", ".join(sorted(BLAS_SEEN)))
    if any("/blas/libblas" in b or "netlib" in b for b in BLAS_SEEN):
        print("WARNING: that is the netlib reference BLAS: torch's Linear/MatMul (mlp, gpt) are")
        print("far slower than with OpenBLAS/MKL; convolutions go through oneDNN either way")


if __name__ == "__main__":
    main()
