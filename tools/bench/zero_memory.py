#!/usr/bin/env python3
# ZeRO memory per rank (dtc-compile --strategy dp=N --zero 1|2), read from the plans themselves
# (--emit plan-text, rank 0): parameter, gradient and optimizer-state bytes next to single device
# and plain dp, and next to the figures of Rajbhandari et al. 2020 (ZeRO, SC'20, figure 1) for
# fp32 training: params 4Ψ, gradients 4Ψ, optimizer state KΨ (K = 8 for Adam's two moments, 4
# for SGD's momentum; the paper's mixed-precision 2Ψ + 2Ψ + 12Ψ counts fp16 copies and an fp32
# master copy that fp32 training does not have). Stage 1: 4Ψ + 4Ψ + KΨ/N; stage 2:
# 4Ψ + (4+K)Ψ/N.
#
# "gradients held" are the gradient bytes alive when the optimizer runs: the whole (all-reduced)
# gradients for single, dp and --zero 1; the reduce-scattered shards for --zero 2 (each rank's
# whole gradients die once their bucket is flattened for the reduce-scatter). "arena" is the
# rank's whole memory plan (activations included).
#
#     tools/bench/zero_memory.py [--build build] [--model models/gpt_train.onnx]
#         [--flags "--batch-size 8 --class-axis -1 --optimizer adam --lr 1e-3"] [--dp 2,4]
import argparse
import os
import re
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUFFER = re.compile(r'^\s*buffer %\d+ "([^"]*)" (\w+) \S+ @\d+\+(\d+)', re.M)
ARENA = re.compile(r"arena=(\d+)")


def plan_bytes(text):
    """Bytes of rank 0's plan by role: parameters, optimizer_state, gradient_held, arena."""
    out = {"parameters": 0, "optimizer_state": 0, "gradients": 0, "grad_shards": 0}
    for name, kind, size in BUFFER.findall(text):
        size = int(size)
        if kind == "param":
            out["parameters"] += size
        elif kind == "opt_state":
            out["optimizer_state"] += size
        elif kind == "grad":
            out["gradients"] += size
        if name.endswith("/grad_shard") or re.search(r"/grad_shard(_\d+)?$", name):
            out["grad_shards"] += size
    out["gradient_held"] = out["grad_shards"] if out["grad_shards"] else out["gradients"]
    m = ARENA.search(text)
    out["arena"] = int(m.group(1)) if m else 0
    return out


def measure(compile_tool, model, flags, dps):
    """{(strategy, zero): plan_bytes} for single and dp=N with --zero 0, 1, 2."""
    rows = {}
    configs = [("single", 0)] + [(f"dp={n}", z) for n in dps for z in (0, 1, 2)]
    for strategy, zero in configs:
        cmd = [compile_tool, model, "--emit", "plan-text", "--rank", "0", "--strategy",
               strategy] + flags + (["--zero", str(zero)] if zero else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)}: {r.stderr.strip()}")
        rows[(strategy, zero)] = plan_bytes(r.stdout)
    return rows


def main():
    ap = argparse.ArgumentParser(description="ZeRO bytes per rank from the plans")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "gpt_train.onnx"))
    ap.add_argument("--flags", default="--batch-size 8 --class-axis -1 --optimizer adam --lr 1e-3")
    ap.add_argument("--dp", default="2,4")
    args = ap.parse_args()
    flags = shlex.split(args.flags)
    dps = [int(x) for x in args.dp.split(",")]
    rows = measure(os.path.join(args.build, "tools", "dtc-compile"), args.model, flags, dps)
    single = rows[("single", 0)]
    psi = single["gradients"] / 4  # trained fp32 elements (one gradient each)
    opt = flags[flags.index("--optimizer") + 1] if "--optimizer" in flags else "sgd"
    k = 8 if opt in ("adam", "adamw") else (4 if "--momentum" in flags else 0)
    print(f"model {os.path.basename(args.model)}: Ψ = {psi:.0f} fp32 parameters, "
          f"{opt} (K = {k} bytes of state per parameter)")
    hdr = (f"{'strategy':<10} {'zero':>4} {'params':>10} {'grads held':>11} {'opt state':>10} "
           f"{'p+g+s':>10} {'ZeRO fp32':>10} {'vs single':>9} {'arena':>10}")
    print(hdr)
    base = single["parameters"] + single["gradient_held"] + single["optimizer_state"]
    for (strategy, zero), m in rows.items():
        n = 1 if strategy == "single" else int(strategy.split("=")[1])
        total = m["parameters"] + m["gradient_held"] + m["optimizer_state"]
        if zero == 2:
            formula = 4 * psi + (4 + k) * psi / n
        elif zero == 1:
            formula = 8 * psi + k * psi / n
        else:
            formula = (8 + k) * psi
        print(f"{strategy:<10} {zero:>4} {m['parameters']:>10} {m['gradient_held']:>11} "
              f"{m['optimizer_state']:>10} {total:>10} {formula:>10.0f} "
              f"{total / base:>9.3f} {m['arena']:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
