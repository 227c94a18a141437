#!/usr/bin/python3
# Data-parallel benchmark: dtc (dtc-compile --strategy dp=N, dtc-run --nproc N) against PyTorch
# DistributedDataParallel (gloo) on CPU, 1 and 2 ranks of one thread each, weak scaling (same
# per-rank batch), same data, weights and optimizer (SGD lr 0.01); then the overlap of dtc's
# gradient all-reduces with compute, from a --trace of the CNN (see tools/bench/TRAINING.md).
#
#     /usr/bin/python3 tools/bench/dp_bench.py [--build build] [--models cnn,gpt] [--steps 30]
#         [--warmup 5] [--batch-per-rank 32] [--repeats 5] [--trace-repeats 3] [--no-overlap]
#         [--overlap-bucket-mb 0.004] [--keep-traces DIR] [--torch-python /usr/bin/python3]
import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_bench import make_data  # noqa: E402  (same synthetic data as the single-device bench)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES_IN_DATA = 4  # the data file holds this many global batches of the largest rank count
RANKS = (1, 2)

# name -> (onnx file, extra dtc-compile flags)
MODELS = {
    "cnn": ("cnn_train.onnx", []),
    "gpt": ("gpt_train.onnx", ["--class-axis", "-1"]),
}




# One PyTorch rank. argv: models dir, model, data .npz, batch per rank, warmup, steps, ddp (0/1).
# Rank and world size come from RANK / WORLD_SIZE (MASTER_ADDR / MASTER_PORT for env://). Rank r
# of step i trains on samples [b * G + r * batch, + batch) of global batch b = i mod batches
# (G = batch * world), the slice dtc-run --no-shuffle gives that rank. Prints one JSON line:
# the step times (s) after the warm-up and the first step's loss (mean over all ranks).
TORCH_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
import torch.distributed as dist
import export_models
name, path = sys.argv[2], sys.argv[3]
batch, warmup, steps, ddp = map(int, sys.argv[4:8])
rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
torch.set_num_threads(1)
torch.set_num_interop_threads(1)
if ddp:
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
torch.manual_seed(0)  # export_models seeds 0 too: the same initial weights as the .onnx file
model = export_models.model_specs()[name][0]().train()
if ddp:  # broadcasts rank 0's parameters; gradient buckets of 25 MiB (the default)
    model = torch.nn.parallel.DistributedDataParallel(model)
data = np.load(path)
x_all = torch.from_numpy(data["tokens" if name == "gpt" else "input"])
y_all = torch.from_numpy(data["label"])
G = batch * world
batches = x_all.shape[0] // G
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()

def step(i):
    s = (i % batches) * G + rank * batch
    x, y = x_all[s:s + batch], y_all[s:s + batch]
    logits = model(x)
    if name == "gpt":  # (N,T,V) scores, class axis -1
        logits, y = logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
    loss = loss_fn(logits, y)
    loss.backward()  # DDP: returns once every gradient bucket is all-reduced (averaged)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()

times, loss0 = [], None
for i in range(warmup + steps):
    t0 = time.perf_counter()
    loss = step(i)
    t = time.perf_counter() - t0
    if i == 0:
        if ddp:  # untimed: the global-batch mean, as dtc logs it
            dist.all_reduce(loss)
            loss /= world
        loss0 = loss.item()
    if i >= warmup:
        times.append(t)
if ddp:
    dist.barrier()
    dist.destroy_process_group()
print(json.dumps({"rank": rank, "times": times, "loss0": loss0}))
"""


class Failure(str):
    """An error message standing in for a result (paths and results are never Failures)."""


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "?"


def run_tool(cmd, **kw):
    """subprocess.run, retried for up to a minute while the binary is missing or being rewritten
    (a rebuild of the build folder); the last OSError becomes a CompletedProcess with rc 127."""
    for attempt in range(7):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, **kw)
        except (FileNotFoundError, PermissionError, OSError) as e:
            if attempt == 6:
                return subprocess.CompletedProcess(cmd, 127, "", f"{cmd[0]}: {e}")
            time.sleep(10)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env():
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


class Bench:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.tool = lambda name: os.path.join(args.build, "tools", name)

    def compile(self, model, strategy, batch, extra=(), tag=""):
        """Compiles a training plan; returns its path, or an error string."""
        onnx, flags = MODELS[model]
        plan = os.path.join(self.tmp, f"{model}-{strategy}{tag}.dtc")
        r = run_tool([self.tool("dtc-compile"), os.path.join(REPO, "models", onnx), "-o", plan,
                      "--strategy", strategy, "--loss", "softmax-cross-entropy", "--optimizer",
                      "sgd", "--lr", "0.01", "--batch-size", str(batch), *flags, *extra])
        if r.returncode != 0:
            return Failure("dtc-compile: " + last_line(r.stderr))
        return plan

    def run_dtc(self, plan, nproc, data, steps, extra=()):
        """Runs dtc-run; returns (list of (step, loss, samples/s) of rank 0's log), or an error."""
        log = os.path.join(self.tmp, "metrics.jsonl")
        if os.path.exists(log):
            os.remove(log)
        cmd = [self.tool("dtc-run"), plan, "--data", data, "--steps", str(steps),
               "--no-shuffle", "--threads", "1", "--log", log, *extra]
        if nproc:
            cmd += ["--nproc", str(nproc)]
        try:
            r = run_tool(cmd, env=child_env(), timeout=300)
        except subprocess.TimeoutExpired:
            return Failure("dtc-run: timed out")
        if r.returncode != 0:
            return Failure("dtc-run: " + last_line(r.stderr))
        out = []
        with open(log) as f:
            for line in f:
                j = json.loads(line)
                if j.get("event") == "step":
                    out.append((j["step"], j["loss"], j["samples_per_s"]))
        return out

    def dtc_point(self, plan, nproc, data, global_batch):
        """(median step time s, first loss) of one dtc run, or an error string."""
        a = self.args
        r = self.run_dtc(plan, nproc, data, a.warmup + a.steps)
        if isinstance(r, Failure):
            return r
        # samples_per_s of a step line: global batch / that step's wall time on rank 0 (batch
        # copy-in, forward, backward with the all-reduces, the step's loss all-reduce, SGD).
        times = [global_batch / sps for step, _, sps in r if step >= a.warmup]
        loss0 = next((l for step, l, _ in r if step == 0), float("nan"))
        return statistics.median(times), loss0

    def torch_point(self, model, data, world, ddp):
        """(median step time s of rank 0, first loss) of one PyTorch run, or an error string."""
        a = self.args
        port = free_port()
        procs = []
        for rank in range(world):
            env = dict(child_env(), RANK=str(rank), WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
            procs.append(subprocess.Popen(
                [a.torch_python, "-c", TORCH_CHILD, os.path.join(REPO, "models"), model, data,
                 str(a.batch_per_rank), str(a.warmup), str(a.steps), str(int(ddp))],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        results, err = {}, None
        for p in procs:
            try:
                out, e = p.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                p.kill()
                out, e = p.communicate()
                err = err or "torch: timed out"
            if p.returncode != 0:
                err = err or "torch: " + last_line(e)
                continue
            j = json.loads(last_line(out))
            results[j["rank"]] = j
        if err:
            return Failure(err)
        return statistics.median(results[0]["times"]), results[0]["loss0"]


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, width, prec=1):
    return f"{x:{width}.{prec}f}" if x is not None else f"{'n/a':>{width}}"


def scaling(bench, args, models):
    """Part 1: samples/s at 1 and 2 ranks, dtc and PyTorch, interleaved over --repeats."""
    b = args.batch_per_rank
    # configs: (system, label, ranks); dtc "single" and torch "plain" are references
    configs = [("dtc", "single", 1), ("dtc", "dp", 1), ("dtc", "dp", 2),
               ("torch", "plain", 1), ("torch", "ddp", 1), ("torch", "ddp", 2)]
    plans, datas, errors = {}, {}, {}
    for model in models:
        data = os.path.join(bench.tmp, model + ".npz")
        rng = np.random.default_rng(list(MODELS).index(model))
        np.savez(data, **make_data(model, b * max(RANKS) * BATCHES_IN_DATA, rng))
        datas[model] = data
        for system, label, n in configs:
            if system == "dtc":
                strategy = "single" if label == "single" else f"dp={n}"
                plans[(model, label, n)] = bench.compile(model, strategy, b * n)
    samples = {}  # (model, system, label, n) -> list of samples/s (one per repeat)
    losses = {}
    jobs = [(m, c) for m in models for c in configs]
    for rep in range(args.repeats):
        order = jobs[:]
        random.Random(rep).shuffle(order)  # interleaved: load drifts hit every config alike
        for model, (system, label, n) in order:
            key = (model, system, label, n)
            if system == "dtc":
                plan = plans[(model, label, n)]
                r = plan if isinstance(plan, Failure) else bench.dtc_point(
                    plan, n if label == "dp" else 0, datas[model], b * n)
            else:
                r = bench.torch_point(model, datas[model], n, label == "ddp")
            if isinstance(r, Failure):
                errors[key] = r
                samples.setdefault(key, []).append(None)
                continue
            samples.setdefault(key, []).append(b * n / r[0])
            losses.setdefault(key, r[1])
        print(f"  repeat {rep + 1}/{args.repeats} done", file=sys.stderr)

    print(f"\n== Scaling: samples/s (global), median of {args.repeats} repeats of the median "
          f"step time over {args.steps} steps after {args.warmup} warm-up steps ==")
    print(f"weak scaling: {b} samples per rank (global batch {b} at 1 rank, {2 * b} at 2); "
          "1 thread per rank; SGD lr 0.01; same data, weights and sample-to-rank split")
    print("eff = throughput(2 ranks) / (2 * throughput(1 rank)); dtc/torch = absolute ratio "
          "(> 1: dtc is faster)")
    print(f"{'model':5} {'ranks':>5} {'dtc':>9} {'torch':>9} {'dtc/torch':>9}   "
          f"{'loss0 dtc':>9} {'loss0 torch':>11}   (spread over repeats: dtc / torch)")
    med = {k: median_or_none(v) for k, v in samples.items()}
    for model in models:
        for d_label, t_label, n in (("single", "plain", 1), ("dp", "ddp", 1), ("dp", "ddp", 2)):
            d, t = med.get((model, "dtc", d_label, n)), med.get((model, "torch", t_label, n))
            ratio = d / t if d and t else None
            ld = losses.get((model, "dtc", d_label, n))
            lt = losses.get((model, "torch", t_label, n))

            def spread(key):
                v = [x for x in samples.get(key, []) if x]
                return f"{min(v):.0f}-{max(v):.0f}" if v else "n/a"
            name = f"{n}" if d_label == "dp" else f"{n}*"
            print(f"{model:5} {name:>5} {fmt(d, 9)} {fmt(t, 9)} {fmt(ratio, 9, 2)}   "
                  f"{fmt(ld, 9, 5)} {fmt(lt, 11, 5)}   "
                  f"({spread((model, 'dtc', d_label, n))} / "
                  f"{spread((model, 'torch', t_label, n))})")
        d1, d2 = med.get((model, "dtc", "dp", 1)), med.get((model, "dtc", "dp", 2))
        t1, t2 = med.get((model, "torch", "ddp", 1)), med.get((model, "torch", "ddp", 2))
        ds, ts = med.get((model, "dtc", "single", 1)), med.get((model, "torch", "plain", 1))
        eff = lambda two, one: two / (2 * one) if one and two else None
        de, te = eff(d2, d1), eff(t2, t1)
        verdict = ("n/a" if de is None or te is None else
                   "yes" if de >= te else "NO")
        print(f"{model:5} efficiency: dtc {fmt(de, 5, 3)}  torch {fmt(te, 5, 3)}  "
              f"dtc >= torch: {verdict}   (against the 1* reference: dtc "
              f"{fmt(eff(d2, ds), 5, 3)}  torch {fmt(eff(t2, ts), 5, 3)})")
    print("(ranks 1*: reference without data parallelism: dtc --strategy single, torch without "
          "DDP; loss0: first step, mean over the global batch)")
    print("(Debian's torch runs Linear/MatMul on the netlib reference BLAS: gpt's torch numbers "
          "are low; see train_bench.py)")
    for k, e in errors.items():
        print(f"error {'/'.join(map(str, k))}: {e}")


def union(intervals):
    """Merged, sorted list of [begin, end) intervals."""
    out = []
    for b, e in sorted(intervals):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def covered(b, e, merged):
    """Length of [b, e) covered by the merged intervals."""
    return sum(max(0, min(e, me) - max(b, mb)) for mb, me in merged if mb < e and me > b)


def subtract(merged, holes):
    """The merged intervals minus the merged intervals `holes`."""
    out = []
    for b, e in merged:
        for hb, he in holes:
            if he <= b or hb >= e:
                continue
            if hb > b:
                out.append([b, hb])
            b = max(b, he)
            if b >= e:
                break
        if b < e:
            out.append([b, e])
    return out


def analyse_trace(path, warmup):
    """Per rank: all-reduce time on the comm thread and the part of it that overlaps kernels.

    Compute thread (tid 0): kernels, plus the executor's collective launches (category
    "all-reduce") and waits (category "wait"), which are not compute and are excluded. Comm
    thread (tid 1): category "all-reduce" events; gradient buckets are named "bucket K", the
    others are the trainer's per-step loss/accuracy sum ("step loss and accuracy") and, with
    --sync-batchnorm, BatchNorm statistics ("node '...BatchNormalization...'"). Steps before
    `warmup` are dropped: the k-th "step loss and accuracy" event ends step k. The blocking
    collectives' spans count as no compute (a sync-BN all-reduce runs inside the BN kernel)."""
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    res = {}
    for rank in sorted({e["pid"] for e in events}):
        ev = [e for e in events if e["pid"] == rank]
        step_ends = sorted(e["ts"] + e["dur"] for e in ev
                           if e["tid"] == 1 and e["name"] == "step loss and accuracy")
        t_min = step_ends[warmup - 1] if 0 < warmup <= len(step_ends) else 0
        ev = [e for e in ev if e["ts"] >= t_min]
        comm = [e for e in ev if e["tid"] == 1 and e.get("cat") == "all-reduce"]
        # A blocking collective (sync-BN statistics) runs inside its kernel's event: the compute
        # thread waits then, so its span is cut out of the compute intervals.
        blocking = union([e["ts"], e["ts"] + e["dur"]] for e in comm
                         if not e["name"].startswith("bucket "))
        kernels = subtract(union([e["ts"], e["ts"] + e["dur"]] for e in ev
                                 if e["tid"] == 0 and e.get("cat") not in ("all-reduce", "wait")),
                           blocking)
        r = {}
        for kind, sel in (("buckets", lambda e: e["name"].startswith("bucket ")),
                          ("all", lambda e: True)):
            evs = [e for e in comm if sel(e)]
            total = sum(e["dur"] for e in evs)
            over = sum(covered(e["ts"], e["ts"] + e["dur"], kernels) for e in evs)
            r[kind] = (over, total, len(evs))
        waits = [e["dur"] for e in ev if e["tid"] == 0 and e.get("cat") == "wait"]
        launches = [e["dur"] for e in ev if e["tid"] == 0 and e.get("cat") == "all-reduce"]
        steps = max(1, len(step_ends) - warmup)
        r["wait_per_step"] = sum(waits) / steps
        r["launch_med"] = statistics.median(launches) if launches else 0
        r["launch_per_step"] = sum(launches) / steps
        r["step"] = (step_ends[-1] - t_min) / steps if len(step_ends) > warmup else 0
        r["nbuckets"] = len({e["name"] for e in comm if e["name"].startswith("bucket ")})
        res[rank] = r
    return res


def overlap(bench, args):
    """Part 2: overlap of the CNN's gradient all-reduces with compute, from dtc --trace at 2
    ranks, for the default bucket size, --overlap-bucket-mb, and that with --sync-batchnorm."""
    b = args.batch_per_rank
    data = os.path.join(bench.tmp, "cnn-overlap.npz")
    np.savez(data, **make_data("cnn", b * 2 * BATCHES_IN_DATA, np.random.default_rng(0)))
    mb = args.overlap_bucket_mb
    variants = [("default 25 MiB", []), (f"{mb} MiB", ["--bucket-mb", str(mb)]),
                (f"{mb} MiB + sync-BN", ["--bucket-mb", str(mb), "--sync-batchnorm"])]
    print(f"\n== Overlap (cnn, 2 ranks, batch {b}/rank, {args.trace_steps} traced steps, "
          f"first {args.warmup} dropped; median over {args.trace_repeats} runs) ==")
    print("ovl = part of the comm thread's all-reduce time (us) that intersects the union of "
          "kernel events of the same rank (launch/wait events excluded)")
    print("buckets: gradient buckets only; all: + 'step loss and accuracy' (+ sync-BN "
          "statistics), which are blocking")
    print(f"{'buckets':22} {'rank':>4} {'n':>2} {'ovl buckets':>11} {'ovl all':>8} "
          f"{'bucket us/step':>14} {'wait us/step':>12} {'launch us':>9} {'step ms':>7}")
    for i, (label, extra) in enumerate(variants):
        plan = bench.compile("cnn", "dp=2", 2 * b, extra, tag=f"-ovl{i}")
        if isinstance(plan, Failure):
            print(f"{label:22} {plan}")
            continue
        runs = []
        for rep in range(args.trace_repeats):
            trace = os.path.join(bench.tmp, f"trace{i}-{rep}.json")
            r = bench.run_dtc(plan, 2, data, args.trace_steps, ["--trace", trace])
            if isinstance(r, Failure):
                print(f"{label:22} {r}")
                break
            runs.append(analyse_trace(trace, args.warmup))
            if args.keep_traces:
                os.makedirs(args.keep_traces, exist_ok=True)
                os.replace(trace, os.path.join(args.keep_traces, os.path.basename(trace)))
        if not runs:
            continue
        steps = max(1, args.trace_steps - args.warmup)
        for rank in list(sorted(runs[0])) + ["all"]:
            def pick(f):
                vals = []
                for run in runs:
                    rs = run.values() if rank == "all" else [run[rank]]
                    vals.append(f(rs))
                return statistics.median(vals)
            frac = lambda kind: pick(lambda rs: sum(r[kind][0] for r in rs) /
                                     max(1, sum(r[kind][1] for r in rs)))
            per = lambda key: pick(lambda rs: statistics.mean(r[key] for r in rs))
            bus = pick(lambda rs: statistics.mean(r["buckets"][1] for r in rs)) / steps
            print(f"{label:22} {str(rank):>4} {runs[0][0]['nbuckets']:2} "
                  f"{100 * frac('buckets'):10.1f}% {100 * frac('all'):7.1f}% {bus:14.0f} "
                  f"{per('wait_per_step'):12.0f} {per('launch_med'):9.0f} "
                  f"{per('step') / 1e3:7.1f}")
    print("rank all: the ranks' times summed (ovl) or averaged (per step), median over runs")
    print("target: >= 50% of the bucket all-reduce time overlapped on the CNN (several buckets)")


def main():
    ap = argparse.ArgumentParser(
        description="dtc data parallelism vs PyTorch DDP (gloo) on CPU: scaling and overlap")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch-per-rank", type=int, default=32)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved runs of every config")
    ap.add_argument("--trace-repeats", type=int, default=3, help="traced runs of every variant")
    ap.add_argument("--trace-steps", type=int, default=20, help="steps of each traced run")
    ap.add_argument("--overlap-bucket-mb", type=float, default=0.004,
                    help="small bucket size for the overlap part (the CNN's gradients: ~22 KB)")
    ap.add_argument("--no-overlap", action="store_true", help="skip the trace/overlap part")
    ap.add_argument("--keep-traces", default="", help="move the traces to this folder")
    ap.add_argument("--torch-python", default="/usr/bin/python3",
                    help="interpreter with torch and torch.distributed (gloo)")
    args = ap.parse_args()
    if min(args.steps, args.warmup, args.repeats, args.trace_repeats, args.batch_per_rank) < 1:
        sys.exit("--steps, --warmup, --repeats, --trace-repeats, --batch-per-rank must be >= 1")
    if args.trace_steps <= args.warmup:
        sys.exit("--trace-steps must exceed --warmup")
    models = args.models.split(",")
    for m in models:
        if m not in MODELS:
            sys.exit(f"unknown model '{m}' (known: {', '.join(MODELS)})")
    try:
        with open("/proc/loadavg") as f:
            print(f"load average at start: {' '.join(f.read().split()[:3])} "
                  f"({os.cpu_count()} cores)")
    except OSError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(args, tmp)
        scaling(bench, args, models)
        if not args.no_overlap:
            overlap(bench, args)
    with open("/proc/loadavg") as f:
        print(f"load average at end: {' '.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main()
