#!/usr/bin/env python3
# Pipeline benchmark (issue 14): on a deep MLP generated here (--layers Gemm+Relu layers of width
# --width, then a classifier), for S = 2 stages (one core each; more stages than cores would
# measure the oversubscription, not the schedule):
#   1. bubble fraction per schedule and micro-batch count, measured from dtc-run --trace (per
#      step after --warmup: 1 - sum over stages of kernel time / (S * step span)), printed
#      beside the formula (S - 1) / (M + S - 1) of GPipe and 1F1B, (S - 1) / (VM + S - 1) of
#      interleaved 1F1B with V = --virtual-stages chunks per stage, and (S - 1) / (3M + S - 1) of
#      ZB-H1 (equal forward, input-gradient and weight-gradient times);
#   2. each stage's arena (the plan's memory, activations included) for GPipe and 1F1B, and the
#      simulated peak number of micro-batches whose activations a stage keeps;
#   3. throughput (samples/s, median over the steps after warm-up) of pp=2 against dp=2 and one
#      device on the same global batch, so users see when pipelining pays.
#
#     .venv/bin/python3 tools/bench/pp_bench.py [--build build] [--layers 8] [--width 512]
#         [--batch 512] [--steps 12] [--warmup 3] [--microbatches 1,2,4,8]
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
COMM = {"all-reduce", "all-gather", "reduce-scatter", "broadcast", "send", "recv", "wait"}


def make_model(path, layers, width, classes):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"),
                  numpy_helper.from_array(np.zeros(width, np.float32), f"b{i}")]
        nodes += [helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"h{i}"], name=f"fc{i}",
                                   transB=1),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}")]
        x = f"r{i}"
    w = (rng.standard_normal((classes, width)) / np.sqrt(width)).astype(np.float32)
    inits += [numpy_helper.from_array(w, "wout"),
              numpy_helper.from_array(np.zeros(classes, np.float32), "bout")]
    nodes.append(helper.make_node("Gemm", [x, "wout", "bout"], ["logits"], name="head",
                                  transB=1))
    g = helper.make_graph(nodes, "deep_mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                         ["N", classes])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{(r.stderr + r.stdout)[-3000:]}")
    return r


def compile_plan(args, tmp, model, strategy):
    out = os.path.join(tmp, re.sub(r"[^a-z0-9]+", "_", strategy) + ".dtc")
    r = run([os.path.join(args.build, "tools", "dtc-compile"), model, "-o", out, "--strategy",
             strategy, "--batch-size", str(args.batch), "--optimizer", "sgd", "--lr", "0.01"])
    arenas = [int(m.group(1)) for m in re.finditer(r"arena (\d+) bytes", r.stderr)]
    return out, arenas


def train(args, tmp, plan, data, nproc, trace=None):
    log = plan + ".jsonl"
    cmd = [os.path.join(args.build, "tools", "dtc-run"), plan, "--data", data, "--steps",
           str(args.steps), "--no-shuffle", "--log", log, "--print-every", "1000000"]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    if trace:
        cmd += ["--trace", trace]
    run(cmd)
    with open(log) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rates = [x["samples_per_s"] for x in rows if x.get("event") == "step"][args.warmup:]
    return statistics.median(rates)


def union_length(intervals, lo, hi):
    total, end = 0.0, lo
    for b, e in sorted(intervals):
        b, e = max(b, end, lo), min(e, hi)
        if e > b:
            total += e - b
            end = e
    return total


def bubble(trace, stages, warmup):
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = {}
    for e in events:
        if e.get("cat") == "step":
            k = int(e["name"].split()[-1])
            lo, hi = steps.get(k, (e["ts"], e["ts"] + e["dur"]))
            steps[k] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
    kernels = {}
    for e in events:
        if e["tid"] == 0 and e.get("cat") not in COMM:
            kernels.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    fractions = []
    for k, (lo, hi) in sorted(steps.items()):
        if k < warmup or hi <= lo:
            continue
        busy = sum(union_length(iv, lo, hi) for iv in kernels.values())
        fractions.append(1 - busy / (stages * (hi - lo)))
    return statistics.median(fractions)


def formula_peaks(stages, microbatches, schedule):
    """Peak micro-batches in flight per stage by the schedules' definition (GPipe keeps all M,
    1F1B at most S - s; passes/PipelineSchedule.h, checked by its unit tests)."""
    if schedule == "gpipe":
        return [microbatches] * stages
    return [min(stages - s, microbatches) for s in range(stages)]


def main():
    ap = argparse.ArgumentParser(description="pipeline-parallel benchmark")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=512, help="global batch")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--microbatches", default="1,2,4,8")
    ap.add_argument("--virtual-stages", type=int, default=2,
                    help="model chunks per stage of the interleaved schedule")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    S = 2
    tmp = tempfile.mkdtemp(prefix="dtc-ppbench-")
    model = os.path.join(tmp, "deep_mlp.onnx")
    make_model(model, args.layers, args.width, args.classes)
    rng = np.random.default_rng(1)
    n = args.batch * (args.steps + 1)
    data = os.path.join(tmp, "data.npz")
    np.savez(data, x=rng.standard_normal((n, args.width)).astype(np.float32),
             label=rng.integers(0, args.classes, n).astype(np.int64))
    print(f"model: {args.layers} x (Gemm {args.width}x{args.width} + Relu) + classifier, "
          f"global batch {args.batch}, {args.steps} steps ({args.warmup} warm-up), "
          f"{S} stages, 1 thread per rank")

    print("\n1. bubble fraction (measured from --trace, whole step) vs the formula: GPipe, 1F1B "
          "(S-1)/(M+S-1), interleaved with V chunks (S-1)/(VM+S-1), ZB-H1 (S-1)/(3M+S-1)")
    print(f"{'schedule':>14} {'M':>3} {'measured':>9} {'formula':>8} {'samples/s':>10}")
    memory = {}
    for sched in ("gpipe", "1f1b", "interleaved", "zb-h1"):
        for mb in [int(x) for x in args.microbatches.split(",")]:
            if args.batch % mb or (sched == "interleaved" and mb % S):
                continue
            strategy = f"pp={S},microbatches={mb},schedule={sched}"
            label, V = sched, 1
            if sched == "interleaved":
                V = args.virtual_stages
                strategy += f",virtual-stages={V}"
                label = f"interleaved,V={V}"
            plan, arenas = compile_plan(args, tmp, model, strategy)
            memory[(sched, mb)] = arenas
            trace = plan + ".trace.json"
            rate = train(args, tmp, plan, data, S, trace)
            # ZB-H1's ideal with F = B = W: (S-1) of 3M+S-1 units; GPipe and 1F1B: (S-1)/(M+S-1).
            ideal = ((S - 1) / (3 * mb + S - 1) if sched == "zb-h1" else
                     (S - 1) / (V * mb + S - 1))
            print(f"{label:>14} {mb:>3} {bubble(trace, S, args.warmup):>9.3f} "
                  f"{ideal:>8.3f} {rate:>10.1f}")

    print("\n2. arena per stage (bytes, from the plans: parameters, gradients and activations) "
          "and the micro-batches whose activations a stage keeps at once (schedule formula: "
          "GPipe M, 1F1B S - s)")
    for mb in [int(x) for x in args.microbatches.split(",")]:
        if ("gpipe", mb) not in memory:
            continue
        g, o = memory[("gpipe", mb)], memory[("1f1b", mb)]
        row = ", ".join(f"stage {s}: gpipe {g[s]} / 1f1b {o[s]} ({o[s] / g[s]:.3f}x; in flight "
                        f"{formula_peaks(S, mb, 'gpipe')[s]} / "
                        f"{formula_peaks(S, mb, '1f1b')[s]})" for s in range(S))
        print(f"  M={mb}: {row}")

    print("\n3. throughput on the same global batch (samples/s, median after warm-up)")
    single, _ = compile_plan(args, tmp, model, "single")
    dp, _ = compile_plan(args, tmp, model, "dp=2")
    mb = max(int(x) for x in args.microbatches.split(",") if args.batch % int(x) == 0)
    pp, _ = compile_plan(args, tmp, model, f"pp=2,microbatches={mb}")
    r1 = train(args, tmp, single, data, 1)
    r_dp = train(args, tmp, dp, data, 2)
    r_pp = train(args, tmp, pp, data, 2)
    print(f"  single {r1:.1f}   dp=2 {r_dp:.1f} ({r_dp / r1:.2f}x)   "
          f"pp=2,M={mb},1f1b {r_pp:.1f} ({r_pp / r1:.2f}x; pp/dp {r_pp / r_dp:.2f})")


if __name__ == "__main__":
    main()
