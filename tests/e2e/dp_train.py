#!/usr/bin/env python3
"""End-to-end checks of data parallelism (dtc-compile --strategy dp=N, dtc-run --nproc N).

Groups (--only takes a comma-separated subset; all by default):
  equivalence  The law of synchronous data parallelism: N ranks that each take their contiguous
               slice of every global batch and average their gradients train exactly like one
               device on the global batch. For N = 1, 2, 4 (4 is oversubscribed on small
               machines), with the default bucket size and with --bucket-mb 0.001 (many
               buckets: the plan text is checked for buckets that cover every gradient once,
               several gradients in one bucket only below the 1048-byte cap, and more buckets
               than by default), the parameters after 5 steps (--no-shuffle --save-params)
               equal --strategy single with the same global batch and optimizer: MLP
               (digits, SGD momentum 0.9 and Adam), CNN with --sync-batchnorm (parameters and
               BatchNorm running statistics, which --save-params writes), GPT (Adam,
               --class-axis -1). The CNN without --sync-batchnorm at N=2 must run with finite
               losses and must NOT match single device in its running statistics
               (per-replica statistics, DDP's default).
  data         Uneven data: 40 samples, global batch 16, dp=2, --epochs 2 (shuffled, --seed 3):
               exactly 2 steps per epoch in the log, parameters equal single device; a dataset
               smaller than one global batch is an error naming its sample count; a global batch
               that N does not divide is a compile-time error.
  graphs       Models built here with onnx.helper: a second head whose output the loss does not
               read (its parameters get no gradient: dp=2 must not hang, must leave them
               unchanged and match single device elsewhere), and a weight used by two MatMuls
               (weight tying: dp=2 matches single device); both with default and tiny buckets.
  faults       (a) SIGKILL of rank 1 of a running `dtc-run --nproc 2` job: non-zero exit within
               --timeout + slack, and a line naming rank 1; (b) SIGSTOP of rank 1, with 2 ranks
               (dtc-run --nproc) and 3 ranks (mpirun --tag-output): another rank reports an
               error naming rank 1 no earlier than 0.5 x --timeout and no later than --timeout +
               slack, the job exits non-zero and no live rank is left behind; (c) MPMD mpirun with
               two different plans (different --lr): every rank fails at start-up with a
               fingerprint error, well before --timeout, without training; (d) --nproc 3 with a
               dp=2 plan is a usage error (exit 2), and a dp=2 plan run without mpirun/--nproc is
               an error saying how to start it.

The equivalence law: per tensor, err = max|dp - single| / max(max|single|, 1e-2) <= 1e-5. The
floor 1e-2 makes tensors whose values are all tiny (a BatchNorm bias after 5 small steps, max
~5e-4) compare absolutely at 1e-7: their values are sums with heavy cancellation, and the
different summation order of N partial sums moves them by ~1e-8. For Adam, elements whose
single-device first-step gradient is non-zero but below 1e-4 x the tensor's largest (the key
bias of attention, mathematically zero; a weight whose gradient is ~2e-8) are left out: Adam's
first step is lr * g / (|g| + eps), which turns the rounding of such a g into a change of
order lr. The count of left-out elements is printed. Exact zeros are kept (they are exact in
every summation order).

Every rank runs with OMP_NUM_THREADS=1 (passed on by dtc-run --nproc). Every subprocess has a
timeout, so a hang fails the test instead of hanging CI; processes left by a fault check are
found by their unique temporary plan path and killed by pid.

Prints one line per check (PASS/FAIL name: details, seconds); exits 1 listing the failing
checks.

Usage: dp_train.py --build BUILD_DIR [--only equivalence,data,graphs,faults] [--keep]
"""
import argparse
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "models")
GOLDEN = os.path.join(HERE, "golden")
GROUPS = ["equivalence", "data", "graphs", "faults"]

LAW_RTOL = 1e-5
LAW_FLOOR = 1e-2
ADAM_NOISE = 1e-4
STEPS = 5
FAULT_TIMEOUT = 10.0  # dtc-run --timeout in the fault checks
SLACK = 20.0  # seconds allowed beyond --timeout for detection and tear-down
HARD_LIMIT = 90  # subprocess limit of a fault check
RUN_LIMIT = 240  # subprocess limit of an ordinary run


class CheckFailed(Exception):
    pass


def env():
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    e["OMP_WAIT_POLICY"] = "passive"
    return e


def mpirun_base():
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "--tag-output",
           "-x", "OMP_NUM_THREADS"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


class Runner:
    """Tool invocations, compiled-plan cache, check bookkeeping."""

    def __init__(self, build, tmp):
        self.compile_tool = os.path.join(build, "tools", "dtc-compile")
        self.run_tool = os.path.join(build, "tools", "dtc-run")
        for t in (self.compile_tool, self.run_tool):
            if not os.access(t, os.X_OK):
                sys.exit(f"error: {t} not found (build dtc-compile and dtc-run)")
        self.tmp = tmp
        self.plans = {}
        self.results = []
        self.counter = 0

    def path(self, name):
        return os.path.join(self.tmp, name)

    def unique(self, stem, ext):
        self.counter += 1
        return self.path(f"{stem}-{self.counter}{ext}")

    def exec(self, cmd, timeout=RUN_LIMIT):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())
        except subprocess.TimeoutExpired as e:
            raise CheckFailed(f"timed out after {timeout} s: {shlex.join(cmd)}") from e

    def compile(self, model, flags):
        key = (model, tuple(flags))
        if key not in self.plans:
            out = self.unique(os.path.splitext(os.path.basename(model))[0], ".dtc")
            cmd = [self.compile_tool, model, "-o", out] + flags
            r = self.exec(cmd)
            if r.returncode != 0:
                raise CheckFailed(f"dtc-compile failed (exit {r.returncode}): {shlex.join(cmd)}\n"
                                  f"{r.stderr.strip()}")
            self.plans[key] = out
        return self.plans[key]

    def run_groups(self, runs, keep=False):
        """Calls each of `runs` (functions of this runner), removes the scratch folder unless
        `keep`, prints the count of passed checks and exits 1 when any failed."""
        try:
            for run in runs:
                run(self)
        finally:
            if not keep:
                shutil.rmtree(self.tmp, ignore_errors=True)
        failed = [n for n, ok in self.results if not ok]
        print(f"{len(self.results) - len(failed)}/{len(self.results)} checks passed")
        if failed:
            print("failed: " + ", ".join(failed))
            sys.exit(1)

    def expect_compile_error(self, model, flags, pattern):
        """dtc-compile must fail with stderr matching `pattern` and write no plan; returns the
        first line of its stderr."""
        out = self.unique("bad", ".dtc")
        res = self.exec([self.compile_tool, model, "-o", out] + flags)
        if res.returncode == 0 or not re.search(pattern, res.stderr):
            raise CheckFailed(f"exit {res.returncode}, stderr: {res.stderr.strip()}")
        if os.path.exists(out):
            raise CheckFailed("a plan was written")
        return res.stderr.strip().splitlines()[0]

    def plan_text(self, model, flags):
        cmd = [self.compile_tool, model, "--emit", "plan-text", "--rank", "0"] + flags
        r = self.exec(cmd)
        if r.returncode != 0:
            raise CheckFailed(f"dtc-compile failed: {shlex.join(cmd)}\n{r.stderr.strip()}")
        return r.stdout

    def train(self, plan, data, nproc, extra, timeout=RUN_LIMIT):
        """dtc-run the plan (through --nproc when nproc); returns (params, log rows)."""
        params = self.unique("params", ".npz")
        log = self.unique("log", ".jsonl")
        cmd = [self.run_tool, plan, "--data", data, "--save-params", params, "--log", log] + extra
        if nproc:
            cmd += ["--nproc", str(nproc), "--timeout", "60"]
        r = self.exec(cmd, timeout)
        if r.returncode != 0:
            raise CheckFailed(f"dtc-run failed (exit {r.returncode}): {shlex.join(cmd)}\n"
                              f"{(r.stderr + r.stdout).strip()[-3000:]}")
        with np.load(params) as z:
            p = {k: z[k] for k in z.files}
        with open(log) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return p, rows

    def gradients(self, plan, data):
        g = self.unique("grads", ".npz")
        cmd = [self.run_tool, plan, "--data", data, "--steps", "1", "--no-shuffle",
               "--dump-gradients", g]
        r = self.exec(cmd)
        if r.returncode != 0:
            raise CheckFailed(f"dtc-run failed: {shlex.join(cmd)}\n{r.stderr.strip()}")
        with np.load(g) as z:
            return {k: z[k] for k in z.files}

    def check(self, name, fn):
        t0 = time.monotonic()
        try:
            detail = fn()
            ok = True
        except CheckFailed as e:
            ok, detail = False, str(e)
        except Exception as e:  # noqa: BLE001 - an unexpected error fails the check, not the run
            ok, detail = False, f"{type(e).__name__}: {e}"
        dt = time.monotonic() - t0
        first, _, rest = (detail or "").partition("\n")
        print(f"{'PASS' if ok else 'FAIL'} {name}: {first} ({dt:.1f} s)", flush=True)
        if rest:
            print("    " + rest.replace("\n", "\n    "), flush=True)
        self.results.append((name, ok))


def law(single, dp, grad1=None, exempt=()):
    """Worst per-tensor err of dp against single; returns (err, tensor, left-out elements)."""
    if sorted(single) != sorted(dp):
        raise CheckFailed(f"saved tensors differ: single {sorted(single)} dp {sorted(dp)}")
    worst, worst_name, left_out = 0.0, None, 0
    for k in single:
        if k in exempt:
            continue
        s, d = single[k].astype(np.float64), dp[k].astype(np.float64)
        if s.shape != d.shape:
            raise CheckFailed(f"{k}: shape {d.shape}, single device {s.shape}")
        diff = np.abs(d - s)
        if grad1 is not None and k in grad1:
            g = np.abs(grad1[k])
            noise = (g > 0) & (g < ADAM_NOISE * g.max())
            left_out += int(noise.sum())
            diff = np.where(noise, 0.0, diff)
        if not np.all(np.isfinite(d)):
            return math.inf, k, left_out
        err = float(diff.max()) / max(float(np.abs(s).max()), LAW_FLOOR)
        if err > worst or worst_name is None:
            worst, worst_name = err, k
    return worst, worst_name, left_out


def assert_law(single, dp, grad1=None, exempt=()):
    err, name, left_out = law(single, dp, grad1, exempt)
    extra = f", {left_out} Adam-noise elements left out" if grad1 is not None else ""
    msg = f"worst {name} err {err:.2e} (law <= {LAW_RTOL:g}){extra}"
    if not err <= LAW_RTOL:
        raise CheckFailed(msg)
    return msg


def buckets_of(text):
    """The gradient all-reduce buckets of a plan text: (list of [bytes per gradient], number of
    all-reduced gradient buffers)."""
    sizes = {}
    for m in re.finditer(r'buffer (%\d+) "[^"]*/all-reduced" grad \S+ @\d+\+(\d+)', text):
        sizes[m.group(1)] = int(m.group(2))
    buckets = []
    for m in re.finditer(r'^\s*\d+: (.*?) = all-reduce-mean\(.*name="bucket \d+"', text, re.M):
        buckets.append([sizes.get(b.strip(), -1) for b in m.group(1).split(",")])
    return buckets, len(sizes)


# ---------------------------------------------------------------- equivalence

def equivalence_cases():
    digits = os.path.join(MODELS, "data", "digits_train.npz")
    mlp = os.path.join(MODELS, "mlp_digits.onnx")
    return [
        # name, model, data, common flags, dp-only flags, adam
        ("mlp-sgd", mlp, digits,
         ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"], [],
         False),
        ("mlp-adam", mlp, digits, ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01"],
         [], True),
        ("cnn-syncbn-sgd", os.path.join(MODELS, "cnn_train.onnx"),
         os.path.join(GOLDEN, "cnn_data.npz"),
         ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"],
         ["--sync-batchnorm"], False),
        ("gpt-adam", os.path.join(MODELS, "gpt_train.onnx"), os.path.join(GOLDEN, "gpt_data.npz"),
         ["--batch-size", "8", "--class-axis", "-1", "--optimizer", "adam", "--lr", "1e-3"], [],
         True),
    ]


RANK_CONFIGS = [(1, None), (2, None), (2, 0.001), (4, None), (4, 0.001)]


def run_equivalence(r):
    run_args = ["--steps", str(STEPS), "--no-shuffle"]
    for name, model, data, flags, dp_flags, adam in equivalence_cases():
        base = {}

        def single():
            plan = r.compile(model, ["--strategy", "single"] + flags)
            base["params"], rows = r.train(plan, data, 0, run_args)
            steps = sum(1 for x in rows if x.get("event") == "step")
            if steps != STEPS:
                raise CheckFailed(f"single device ran {steps} steps, expected {STEPS}")
            if adam:
                base["grad1"] = r.gradients(plan, data)
            detail = f"{len(base['params'])} tensors"
            if "sync-batchnorm" in " ".join(dp_flags):
                stats = [k for k in base["params"] if "running_" in k]
                if not stats:
                    raise CheckFailed("--save-params wrote no BatchNorm running statistics: "
                                      f"{sorted(base['params'])}")
                detail += f" incl. {len(stats)} running statistics"
            return detail

        r.check(f"equivalence/{name}/single", single)
        for n, bucket in RANK_CONFIGS:
            bflags = ["--bucket-mb", str(bucket)] if bucket else []
            label = f"equivalence/{name}/dp={n}/bucket={'default' if bucket is None else bucket}"

            def dp(n=n, bflags=bflags):
                if "params" not in base:
                    raise CheckFailed("no single-device baseline (see above)")
                plan = r.compile(model, ["--strategy", f"dp={n}"] + flags + dp_flags + bflags)
                params, rows = r.train(plan, data, n, run_args)
                steps = sum(1 for x in rows if x.get("event") == "step")
                if steps != STEPS:
                    raise CheckFailed(f"ran {steps} steps, expected {STEPS}")
                return assert_law(base["params"], params, base.get("grad1"))

            r.check(label, dp)

        def buckets():
            common = ["--strategy", "dp=2"] + flags + dp_flags
            default, ng = buckets_of(r.plan_text(model, common))
            tiny, ng_tiny = buckets_of(r.plan_text(model, common + ["--bucket-mb", "0.001"]))
            cap = 0.001 * 1024 * 1024
            msg = (f"{ng} gradients: {len(default)} bucket(s) by default, {len(tiny)} with "
                   f"--bucket-mb 0.001 (sizes {[sum(b) for b in tiny]} bytes)")
            problems = []
            for label, bs in (("default", default), ("0.001", tiny)):
                if sum(len(b) for b in bs) != ng or any(x < 0 for b in bs for x in b):
                    problems.append(f"{label}: the buckets do not cover each of the {ng} "
                                    f"all-reduced gradients exactly once")
            if ng_tiny != ng:
                problems.append(f"{ng_tiny} all-reduced gradients with 0.001, {ng} by default")
            over = [b for b in tiny if len(b) > 1 and sum(b) > cap]
            if over:
                problems.append(f"0.001: buckets {over} hold several gradients beyond the cap")
            if ng > 1 and len(default) >= len(tiny):
                problems.append("0.001 does not give more buckets than the default")
            if problems:
                raise CheckFailed(msg + ": " + "; ".join(problems))
            return msg

        r.check(f"equivalence/{name}/buckets", buckets)

    # CNN without --sync-batchnorm: per-replica statistics.
    def cnn_local_bn():
        model = os.path.join(MODELS, "cnn_train.onnx")
        data = os.path.join(GOLDEN, "cnn_data.npz")
        flags = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]
        single, _ = r.train(r.compile(model, ["--strategy", "single"] + flags), data, 0,
                            run_args)
        dp, rows = r.train(r.compile(model, ["--strategy", "dp=2"] + flags), data, 2, run_args)
        losses = [x["loss"] for x in rows if x.get("event") == "step"]
        if len(losses) != STEPS or not all(math.isfinite(x) for x in losses):
            raise CheckFailed(f"losses {losses}: expected {STEPS} finite values")
        stats = [k for k in single if "running_" in k]
        if not stats:
            raise CheckFailed("no running statistics saved")
        errs = {k: float(np.abs(dp[k] - single[k]).max()) / max(float(np.abs(single[k]).max()),
                                                                 LAW_FLOOR) for k in stats}
        same = [k for k, e in errs.items() if e < 1e-3]
        msg = (f"losses finite; running statistics differ from single device "
               f"(smallest err {min(errs.values()):.2e} in {min(errs, key=errs.get)})")
        if same:
            raise CheckFailed(f"running statistics {same} equal single device without "
                              f"--sync-batchnorm (err < 1e-3): statistics are not per replica")
        return msg

    r.check("equivalence/cnn-local-bn/dp=2", cnn_local_bn)


# ---------------------------------------------------------------- data

def run_data(r):
    digits = os.path.join(MODELS, "data", "digits_train.npz")
    mlp = os.path.join(MODELS, "mlp_digits.onnx")
    flags = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]
    with np.load(digits) as z:
        d40, d12 = r.path("digits40.npz"), r.path("digits12.npz")
        np.savez(d40, input=z["input"][:40], label=z["label"][:40])
        np.savez(d12, input=z["input"][:12], label=z["label"][:12])

    def uneven():
        run_args = ["--epochs", "2", "--seed", "3"]
        single, srows = r.train(r.compile(mlp, ["--strategy", "single"] + flags), d40, 0,
                                run_args)
        dp, rows = r.train(r.compile(mlp, ["--strategy", "dp=2"] + flags), d40, 2, run_args)
        per_epoch = {}
        for x in rows:
            if x.get("event") == "step":
                per_epoch[x["epoch"]] = per_epoch.get(x["epoch"], 0) + 1
        if per_epoch != {0: 2, 1: 2}:
            raise CheckFailed(f"steps per epoch {per_epoch}, expected {{0: 2, 1: 2}} "
                              f"(40 samples, global batch 16: the partial batch is dropped)")
        return "2 steps per epoch; " + assert_law(single, dp)

    r.check("data/uneven-40-samples/dp=2", uneven)

    def too_small():
        plan = r.compile(mlp, ["--strategy", "dp=2"] + flags)
        cmd = [r.run_tool, plan, "--nproc", "2", "--timeout", "30", "--data", d12, "--steps", "2"]
        res = r.exec(cmd, HARD_LIMIT)
        out = res.stderr + res.stdout
        errs = [ln for ln in out.splitlines() if "error:" in ln and re.search(r"\b12\b", ln)]
        if res.returncode == 0 or not errs:
            raise CheckFailed(f"exit {res.returncode}, expected non-zero with an error naming "
                              f"the 12 samples:\n{out.strip()[-2000:]}")
        return f"exit {res.returncode}: {errs[0].strip()}"

    r.check("data/smaller-than-global-batch", too_small)

    def indivisible():
        out = r.path("indivisible.dtc")
        cmd = [r.compile_tool, mlp, "-o", out, "--strategy", "dp=4", "--batch-size", "10"]
        res = r.exec(cmd)
        errs = [ln for ln in res.stderr.splitlines() if "error:" in ln]
        if res.returncode == 0 or not errs or os.path.exists(out):
            raise CheckFailed(f"exit {res.returncode}, expected a compile-time error and no "
                              f"plan:\n{res.stderr.strip()}")
        return f"exit {res.returncode}: {errs[0].strip()}"

    r.check("data/batch-10-over-dp=4", indivisible)


# ---------------------------------------------------------------- graphs

def build_graph_models(tmp):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32),
                                       name)

    def save(graph, path):
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, path)

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 8])
    unused = helper.make_graph(
        [helper.make_node("Gemm", ["input", "w1", "b1"], ["h0"], transB=1),
         helper.make_node("Relu", ["h0"], ["h"]),
         helper.make_node("Gemm", ["h", "w2", "b2"], ["logits"], transB=1),
         helper.make_node("Gemm", ["h", "w3", "b3"], ["aux"], transB=1)],
        "unused_head", [x],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("aux", TensorProto.FLOAT, ["N", 3])],
        [init("w1", (16, 8)), init("b1", (16,)), init("w2", (4, 16)), init("b2", (4,)),
         init("w3", (3, 16)), init("b3", (3,))])
    save(unused, os.path.join(tmp, "unused_head.onnx"))
    tied = helper.make_graph(
        [helper.make_node("MatMul", ["input", "w"], ["a0"]),
         helper.make_node("Relu", ["a0"], ["a"]),
         helper.make_node("MatMul", ["a", "w"], ["b0"]),
         helper.make_node("Tanh", ["b0"], ["b"]),
         helper.make_node("Gemm", ["b", "wo", "bo"], ["logits"], transB=1)],
        "tied_weight", [x], [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])],
        [init("w", (8, 8)), init("wo", (4, 8)), init("bo", (4,))])
    save(tied, os.path.join(tmp, "tied_weight.onnx"))
    np.savez(os.path.join(tmp, "graph_data.npz"),
             input=rng.standard_normal((64, 8)).astype(np.float32),
             label=rng.integers(0, 4, 64).astype(np.int64))
    inits = {}
    for name in ("unused_head", "tied_weight"):
        g = onnx.load(os.path.join(tmp, name + ".onnx")).graph
        inits[name] = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    return inits


def run_graphs(r):
    inits = {}

    def build():
        inits.update(build_graph_models(r.tmp))
        return "unused_head.onnx (loss on output 0 'logits'; 'aux' = Gemm(w3, b3) unused), " \
               "tied_weight.onnx (w feeds two MatMuls)"

    r.check("graphs/build-models", build)
    data = r.path("graph_data.npz")
    flags = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"]
    run_args = ["--steps", str(STEPS), "--no-shuffle"]
    for name, fixed in (("unused_head", ("w3", "b3")), ("tied_weight", ())):
        model = r.path(name + ".onnx")
        for bucket in (None, 0.001):
            bflags = ["--bucket-mb", str(bucket)] if bucket else []

            def check(model=model, name=name, fixed=fixed, bflags=bflags):
                if name not in inits:
                    raise CheckFailed("models not built (see above)")
                single, _ = r.train(r.compile(model, ["--strategy", "single"] + flags), data, 0,
                                    run_args)
                dp, _ = r.train(r.compile(model, ["--strategy", "dp=2"] + flags + bflags), data,
                                2, run_args, timeout=120)
                init = inits[name]
                for k in fixed:
                    if k in dp and not np.array_equal(dp[k], init[k]):
                        raise CheckFailed(f"unused parameter {k} changed by "
                                          f"{float(np.abs(dp[k] - init[k]).max()):.3g}")
                moved = [k for k in single if k not in fixed and np.array_equal(single[k],
                                                                                  init[k])]
                if moved:
                    raise CheckFailed(f"parameters {moved} were not trained at all")
                note = f"{', '.join(fixed)} unchanged; " if fixed else ""
                return note + assert_law(single, dp, exempt=fixed)

            r.check(f"graphs/{name}/dp=2/bucket={'default' if bucket is None else bucket}",
                    check)


# ---------------------------------------------------------------- faults

def procs_with(marker):
    """{pid: rank or None} of the processes whose command line contains marker."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            if marker not in cmdline:
                continue
            with open(f"/proc/{d}/environ", "rb") as f:
                envs = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        rank = None
        for e in envs:
            if e.startswith("OMPI_COMM_WORLD_RANK=") or e.startswith("PMIX_RANK="):
                rank = int(e.split("=", 1)[1])
                break
        found[int(d)] = rank
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Job:
    """A background process whose output lines are collected with their arrival times."""

    def __init__(self, cmd, marker):
        self.marker = marker
        self.lines = []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env(), start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def ranks(self, n, log, limit=60.0):
        """Waits until the n rank processes exist and rank 0 has logged a training step;
        returns {rank: pid}."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            by_rank = {rk: pid for pid, rk in procs_with(self.marker).items() if rk is not None}
            if len(by_rank) == n and os.path.exists(log) and os.path.getsize(log) > 0:
                return by_rank
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise CheckFailed(f"the {n} ranks did not start training within {limit:.0f} s "
                          f"(exit {self.proc.poll()}):\n" + self.text()[-2000:])

    def wait(self, limit):
        try:
            return self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return None

    def text(self):
        return "\n".join(line for _, line in self.lines)

    def cleanup(self):
        """Kills, by pid, the job and every process carrying its unique marker."""
        for _ in range(3):
            pids = [pid for pid in procs_with(self.marker) if alive(pid)]
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if not pids:
                break
            time.sleep(0.3)
        self.wait(10)
        self.reader.join(5)


def fault_plan(r, name, n, batch, flags=()):
    """A CNN plan for n ranks under a unique file name (the marker to find its processes)."""
    plan = r.compile(os.path.join(MODELS, "cnn_train.onnx"),
                     ["--strategy", f"dp={n}", "--batch-size", str(batch), "--optimizer", "sgd",
                      "--lr", "0.01"] + list(flags))
    marked = r.path(f"{name}-{os.getpid()}.dtc")
    if not os.path.exists(marked):
        os.link(plan, marked)
    return marked


def run_faults(r):
    data = os.path.join(GOLDEN, "cnn_data.npz")
    def long_run(name):
        log = r.path(f"{name}.jsonl")
        return log, ["--data", data, "--steps", "100000", "--timeout", str(FAULT_TIMEOUT),
                     "--print-every", "1000000", "--log", log]

    def killed():
        plan = fault_plan(r, "fault-kill", 2, 16)
        log, args = long_run("kill")
        job = Job([r.run_tool, plan, "--nproc", "2"] + args, plan)
        try:
            ranks = job.ranks(2, log)
            time.sleep(2.0)
            if job.proc.poll() is not None:
                raise CheckFailed(f"the job ended before the kill (exit {job.proc.poll()}):\n"
                                  + job.text()[-2000:])
            t0 = time.monotonic()
            os.kill(ranks[1], signal.SIGKILL)
            rc = job.wait(HARD_LIMIT)
            dt = time.monotonic() - t0
            job.reader.join(5)
            out = job.text()
            if rc is None:
                raise CheckFailed(f"still running {HARD_LIMIT} s after SIGKILL of rank 1:\n"
                                  + out[-2000:])
            named = [ln for ln in out.splitlines() if re.search(r"\brank 1\b", ln)]
            if rc == 0 or dt > FAULT_TIMEOUT + SLACK or not named:
                raise CheckFailed(f"exit {rc} after {dt:.1f} s (expected non-zero within "
                                  f"{FAULT_TIMEOUT + SLACK:.0f} s and a line naming rank 1):\n"
                                  + out[-2000:])
            return f"exit {rc} {dt:.1f} s after the kill: {named[0].strip()[:150]}"
        finally:
            job.cleanup()

    r.check("faults/sigkill-rank-1/nproc=2", killed)

    def stopped(n):
        plan = fault_plan(r, f"fault-stop{n}", n, 4 * n)
        log, args = long_run(f"stop{n}")
        if n == 2:
            cmd = [r.run_tool, plan, "--nproc", "2"] + args
        else:
            cmd = mpirun_base() + ["-n", str(n), r.run_tool, plan] + args
        job = Job(cmd, plan)
        try:
            ranks = job.ranks(n, log)
            time.sleep(2.0)
            if job.proc.poll() is not None:
                raise CheckFailed(f"the job ended before the stop (exit {job.proc.poll()}):\n"
                                  + job.text()[-2000:])
            t0 = time.monotonic()
            os.kill(ranks[1], signal.SIGSTOP)
            rc = job.wait(FAULT_TIMEOUT + SLACK)
            t_end = time.monotonic() - t0
            others = [pid for rk, pid in ranks.items() if rk != 1]
            left = [pid for pid in others if alive(pid)]
            time.sleep(0.5)
            out = job.text()
            reports = []
            for t, line in job.lines:
                m = re.search(r"error: rank (\d+)\b(.*)", line)
                if m and int(m.group(1)) != 1 and re.search(r"\brank 1\b", m.group(2)):
                    reports.append((t - t0, line))
            problems = []
            if rc is None:
                problems.append(f"job still running {FAULT_TIMEOUT + SLACK:.0f} s after the stop")
            elif rc == 0:
                problems.append("exit 0")
            if left:
                problems.append(f"ranks (pids {left}) other than the stopped one still alive")
            if not reports:
                problems.append("no other rank reported an error naming rank 1")
            else:
                t = reports[0][0]
                if not 0.5 * FAULT_TIMEOUT <= t <= FAULT_TIMEOUT + SLACK:
                    problems.append(f"first report {t:.1f} s after the stop, expected within "
                                    f"[{0.5 * FAULT_TIMEOUT:.0f}, {FAULT_TIMEOUT + SLACK:.0f}] s")
            if problems:
                raise CheckFailed("; ".join(problems) + "\n" + out[-2500:])
            return (f"exit {rc} {t_end:.1f} s after SIGSTOP; report at {reports[0][0]:.1f} s: "
                    f"{reports[0][1].strip()[:160]}")
        finally:
            job.cleanup()

    r.check("faults/sigstop-rank-1/nproc=2", lambda: stopped(2))
    r.check("faults/sigstop-rank-1/mpirun-n=3", lambda: stopped(3))

    def mpmd():
        mlp = os.path.join(MODELS, "mlp_digits.onnx")
        digits = os.path.join(MODELS, "data", "digits_train.npz")
        common = ["--strategy", "dp=2", "--batch-size", "16"]
        a = r.compile(mlp, common + ["--lr", "0.05"])
        b = r.compile(mlp, common + ["--lr", "0.1"])
        log = r.path("mpmd.jsonl")
        args = ["--data", digits, "--steps", "50", "--timeout", "60", "--log", log]
        cmd = (mpirun_base() + ["-n", "1", r.run_tool, a] + args + [":", "-n", "1", r.run_tool, b]
               + args)
        t0 = time.monotonic()
        res = r.exec(cmd, HARD_LIMIT)
        dt = time.monotonic() - t0
        out = res.stdout + res.stderr
        per_rank = {}
        for line in out.splitlines():
            m = re.match(r"\[\d+,(\d+)\]<std(?:err|out)>:(.*)", line)
            if m and "error:" in m.group(2) and "fingerprint" in m.group(2):
                per_rank.setdefault(int(m.group(1)), m.group(2).strip())
        trained = (os.path.exists(log) and os.path.getsize(log) > 0) or \
            re.search(r"\bepoch \d+|train loss", out)
        if res.returncode == 0 or sorted(per_rank) != [0, 1] or trained or dt > 30:
            raise CheckFailed(f"exit {res.returncode} after {dt:.1f} s, fingerprint errors from "
                              f"ranks {sorted(per_rank)}, trained={bool(trained)} (expected "
                              f"non-zero, both ranks, no training, < 30 s with --timeout 60):\n"
                              + out.strip()[-2000:])
        return f"exit {res.returncode} in {dt:.1f} s; rank 0: {per_rank[0][:150]}"

    r.check("faults/different-plans-mpmd", mpmd)

    def usage():
        mlp = os.path.join(MODELS, "mlp_digits.onnx")
        digits = os.path.join(MODELS, "data", "digits_train.npz")
        plan = r.compile(mlp, ["--strategy", "dp=2", "--batch-size", "16"])
        res = r.exec([r.run_tool, plan, "--nproc", "3", "--data", digits, "--steps", "1"],
                     HARD_LIMIT)
        if res.returncode != 2:
            raise CheckFailed(f"--nproc 3 with a dp=2 plan: exit {res.returncode}, expected 2:\n"
                              + (res.stderr + res.stdout).strip()[-1500:])
        res2 = r.exec([r.run_tool, plan, "--data", digits, "--steps", "1"], HARD_LIMIT)
        err = res2.stderr + res2.stdout
        if res2.returncode == 0 or "error:" not in err or not re.search(r"--nproc|mpirun", err):
            raise CheckFailed(f"dp=2 plan without --nproc: exit {res2.returncode}, expected an "
                              f"error saying to use --nproc/mpirun:\n{err.strip()[-1500:]}")
        line = next(ln for ln in err.splitlines() if "error:" in ln)
        return f"--nproc 3: exit 2; without --nproc: exit {res2.returncode}: {line.strip()[:140]}"

    r.check("faults/usage", usage)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="build directory (holds tools/dtc-compile)")
    ap.add_argument("--only", default=",".join(GROUPS),
                    help=f"comma-separated groups: {','.join(GROUPS)}")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    groups = [g for g in args.only.split(",") if g]
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        ap.error(f"unknown group(s) {bad}; known: {GROUPS}")
    if shutil.which("mpirun") is None:
        print("FAIL setup: mpirun not found (install openmpi-bin)")
        return 1
    tmp = tempfile.mkdtemp(prefix="dtc-dp-")
    t0 = time.monotonic()
    r = Runner(os.path.abspath(args.build), tmp)
    try:
        for g in groups:
            {"equivalence": run_equivalence, "data": run_data, "graphs": run_graphs,
             "faults": run_faults}[g](r)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    failed = [name for name, ok in r.results if not ok]
    print(f"{len(r.results) - len(failed)}/{len(r.results)} checks passed in "
          f"{time.monotonic() - t0:.0f} s")
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
