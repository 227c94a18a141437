#!/usr/bin/env python3
"""GPU end-to-end parity: the bundled models on --device cuda against --device cpu (and PyTorch).

For every model with a training golden (tests/e2e/golden/<model>.npz and <model>_data.npz, the
data and hyperparameters tests/e2e/train_parity.py uses) it compiles each plan twice, with
--device cpu and --device cuda, runs both with dtc-run on the golden data (--no-shuffle) and
compares them tensor by tensor:
  infer  --inference plan of the eval-mode export (models/<model>.onnx) on the first batch of
         the data: every output
  grad   SGD lr 0.1, --steps 1 --dump-gradients: the step's loss and every gradient
  sgd    SGD momentum, --steps 20 --save-params: the 20 losses and the final parameters
  adam   Adam, --steps 20: the same
  adamw  AdamW (Adam's hyperparameters, default weight decay), --steps 20: the same
Per tensor err = max|cuda - cpu| / max(max|cpu|, 1e-30) must be <= tol = max(rtol, noise_factor
* noise), noise being the golden's measure of float32 rounding for that tensor (train_golden.py);
rtol is --rtol (1e-4) for outputs, gradients and losses and --param-rtol (1e-3) for parameters
after 20 steps (the CPU's own tolerance against PyTorch: different summation orders drift
through 20 momentum or Adam steps). The cuda gradients and parameters are also checked against
the PyTorch golden itself with train_parity.py's tolerances ("vs torch" column).

--dp 2 (tests/gpu/check.sh passes it on machines with at least 2 GPUs): the MLP (SGD momentum)
and the GPT (Adam) compiled with --strategy dp=2 --device cuda and run with dtc-run --nproc 2
(NCCL all-reduce between the two GPUs) must give the parameters of the single-GPU run on the
same global batch (the law of synchronous data parallelism) within --param-rtol.

Without a usable GPU (a dtc-run built without CUDA, or no device visible) it prints SKIP with
dtc-run's reason and exits 77 (ctest reports the test as skipped). Exit 1 on any failure
(the failing tensors are named), 0 otherwise. The last line counts passed/failed/skipped checks.

--device cpu runs everything with the CPU as the device under test (the CPU against itself): a
dry run of the script's plumbing where there is no GPU.

Usage: gpu_parity.py --build BUILD_DIR [--models mlp,gpt] [--runs infer,grad] [--dp 2] [--keep]
                     [--device cuda|cpu]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import train_parity as tp  # noqa: E402  (compile flags, log reading, golden layout)

SKIP_CODE = 77
RUNS = ["infer", "grad", "sgd", "adam", "adamw"]
# The eval-mode export of each model, for the inference plans (the *_train.onnx exports keep
# BatchNormalization in training mode).
INFER_ONNX = {"mlp": "mlp.onnx", "cnn": "cnn.onnx", "resnet": "resnet.onnx", "unet": "unet.onnx",
              "gpt": "gpt.onnx"}
VIEW_ONLY = """<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 3, 4] x) => (float[N, 12] y) {
  shape = Constant <value = int64[2] {0, -1}> ()
  y = Reshape(x, shape)
}
"""


def gpu_unusable(tools, tmp):
    """None when dtc-run runs a CUDA plan here, else dtc-run's reason."""
    src = os.path.join(tmp, "probe.onnxtxt")
    with open(src, "w") as f:
        f.write(VIEW_ONLY)
    plan = os.path.join(tmp, "probe.dtc")
    tp.run_tool([tools["dtc-compile"], src, "--inference", "--batch-size", "2", "--device",
                 "cuda", "-o", plan], "dtc-compile")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.savez(os.path.join(tmp, "probe_in.npz"), x=x)
    out = os.path.join(tmp, "probe_out.npz")
    r = subprocess.run([tools["dtc-run"], plan, "--infer", "--inputs",
                        os.path.join(tmp, "probe_in.npz"), "--outputs", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        if "no CUDA device is visible" in r.stderr or "built without CUDA" in r.stderr:
            return r.stderr.strip().splitlines()[-1]
        raise tp.ToolError(f"dtc-run on a view-only CUDA plan failed:\n{r.stderr}")
    y = np.load(out)["y"]
    if not np.array_equal(y, x.reshape(2, 12)):
        raise tp.ToolError("dtc-run on a view-only CUDA plan returned wrong values")
    return None


def train_flags(meta, cfg):
    if cfg["optimizer"] != "adamw":
        return tp.compile_flags(meta, cfg)
    flags = tp.compile_flags(meta, dict(cfg, optimizer="adam"))
    flags[flags.index("--optimizer") + 1] = "adamw"
    return flags


class Report:
    def __init__(self, args):
        self.args = args
        self.rows = []  # (model, run, result, worst vs cpu, err, tol, vs torch)
        self.failures = []
        self.passed = self.skipped = 0

    def row(self, model, run, worst, torch_err, failures):
        self.rows.append((model, run, "FAIL" if failures else "ok") + worst + (torch_err,))
        self.failures += [f"{model} {run}: {m}" for m in failures]
        if failures:
            return
        self.passed += 1


def tol_of(golden, key, base, factor):
    noise_key = "noise/" + key
    noise = float(golden[noise_key]) if golden is not None and noise_key in golden.files else 0.0
    return max(base, factor * noise)


def compare(pairs, golden, args, base_of):
    """pairs: [(key, cuda, cpu)]. Returns (worst (name, err, tol), failure messages)."""
    worst, failures = (0.0, "-", 0.0, 0.0), []
    for key, got, want in pairs:
        got, want = np.asarray(got), np.asarray(want)
        tol = tol_of(golden, key, base_of(key), args.noise_factor)
        if got.shape != want.shape:
            failures.append(f"'{key}': cuda shape {got.shape}, cpu {want.shape}")
            continue
        if want.dtype.kind in "iub":
            err = 0.0 if np.array_equal(got, want) else float("inf")
        else:
            err = tp.rel_err(got, want)
        if not err <= tol:
            failures.append(f"'{key}': cuda vs cpu error {err:.2e} > tolerance {tol:.1e}")
        if err / tol >= worst[0]:
            worst = (err / tol, key, err, tol)
    return (worst[1], f"{worst[2]:.1e}", f"{worst[3]:.0e}"), failures


# The device under test (--device): cuda, or cpu for a dry run of this script's own plumbing on
# a machine without a GPU (the cpu against itself).
DEVICE = "cuda"


def run_pair(tools, onnx_path, flags, tmp, stem, run_args):
    """Compiles and runs one plan per device; returns {"cpu"/"cuda": (losses or None, arrays)}
    ("cuda" holds the device under test)."""
    out = {}
    for dev, real in (("cpu", "cpu"), ("cuda", DEVICE)):
        plan = os.path.join(tmp, f"{stem}_{dev}.dtc")
        tp.run_tool([tools["dtc-compile"], onnx_path, "-o", plan, "--device", real] + flags,
                    f"dtc-compile --device {real}")
        out[dev] = run_args(plan, dev)
    return out


def check_model(model, args, tools, tmp, rep):
    gpath = os.path.join(args.golden, f"{model}.npz")
    data = os.path.join(args.golden, f"{model}_data.npz")
    golden = np.load(gpath)
    meta = json.loads(str(golden["meta"]))
    onnx_path = os.path.join(ROOT, "models", meta["onnx"])
    steps = int(meta["steps"])
    batch = int(meta["batch"])
    params = sorted(k[len("grad/"):] for k in golden.files if k.startswith("grad/"))

    for run in args.runs:
        try:
            if run == "infer":
                d = np.load(data)
                inputs = os.path.join(tmp, f"{model}_infer_in.npz")
                np.savez(inputs, **{k: d[k][:batch] for k in d.files if k != "label"})

                def infer(plan, dev):
                    o = os.path.join(tmp, f"{model}_infer_{dev}.npz")
                    tp.run_tool([tools["dtc-run"], plan, "--infer", "--inputs", inputs,
                                 "--outputs", o], f"dtc-run --infer ({dev})")
                    return None, np.load(o)

                res = run_pair(tools, os.path.join(ROOT, "models", INFER_ONNX[model]),
                               ["--inference", "--batch-size", str(batch)], tmp, f"{model}_infer",
                               infer)
                cpu, cuda = res["cpu"][1], res["cuda"][1]
                pairs = [(f"output/{k}", cuda[k], cpu[k]) for k in cpu.files]
                missing = [k for k in cpu.files if k not in cuda.files]
                if missing:
                    rep.row(model, run, ("-", "-", "-"), "-", [f"cuda lacks outputs {missing}"])
                    continue
                worst, failures = compare(pairs, None, args, lambda k: args.rtol)
                rep.row(model, run, worst, "-", failures)
                continue

            cfg = dict(meta["adam"], optimizer="adamw") if run == "adamw" else meta[run]
            n = 1 if run == "grad" else steps

            def train(plan, dev):
                log = os.path.join(tmp, f"{model}_{run}_{dev}.jsonl")
                o = os.path.join(tmp, f"{model}_{run}_{dev}_out.npz")
                cmd = [tools["dtc-run"], plan, "--data", data, "--steps", str(n), "--no-shuffle",
                       "--log", log, "--quiet"]
                cmd += ["--dump-gradients", o] if run == "grad" else ["--save-params", o]
                tp.run_tool(cmd, f"dtc-run ({dev})")
                return tp.read_losses(log, n), np.load(o)

            res = run_pair(tools, onnx_path, train_flags(meta, cfg), tmp, f"{model}_{run}", train)
            (lcpu, cpu), (lcuda, cuda) = res["cpu"], res["cuda"]
            prefix = "grad" if run == "grad" else f"{run}_param"
            loss_key = "grad_loss" if run == "grad" else f"{run}_loss"
            pairs = [(loss_key, lcuda, lcpu)]
            failures = []
            for p in params:
                if p not in cpu.files or p not in cuda.files:
                    failures.append(f"'{p}' missing from the {'cpu' if p not in cpu.files else 'cuda'} run")
                    continue
                pairs.append((f"{prefix}/{p}", cuda[p], cpu[p]))
            for k in cpu.files:  # running statistics --save-params writes
                if k not in params and k in cuda.files:
                    pairs.append((f"{run}_buffer/{k}", cuda[k], cpu[k]))
            multi = run != "grad"
            worst, f2 = compare(pairs, golden, args,
                                lambda k: args.param_rtol if multi and k != loss_key else args.rtol)
            failures += f2
            # The cuda run against PyTorch, as train_parity.py checks the cpu run (not for adamw,
            # which has no golden).
            torch_err = "-"
            if run != "adamw":
                c = tp.Checker(golden, args.rtol, args.noise_factor, args.param_rtol)
                c.check(loss_key, lcuda, golden[loss_key].astype(np.float64))
                masks = {k[len("zero_mask/"):]: golden[k] for k in golden.files
                         if k.startswith("zero_mask/")}
                scale = max(float(np.max(np.abs(golden["grad/" + p]))) for p in params)
                for p in params:
                    if p not in cuda.files:
                        continue
                    if run == "grad":
                        full = p in masks and masks[p].all()
                        c.check(f"grad/{p}", cuda[p], golden[f"grad/{p}"],
                                scale=scale if full else None)
                    else:
                        mask = masks.get(p) if run == "adam" else None
                        if mask is not None and mask.all():
                            continue
                        c.check(f"{run}_param/{p}", cuda[p], golden[f"{run}_param/{p}"], mask=mask)
                c.rows.sort(reverse=True)
                torch_err = f"{c.rows[0][2]:.1e}" if c.rows else "-"
                failures += [f"vs PyTorch: {m}" for m in c.failures]
            rep.row(model, run, worst, torch_err, failures)
        except (tp.ToolError, OSError, ValueError, KeyError) as e:
            short = e.short if isinstance(e, tp.ToolError) else str(e).splitlines()[0]
            rep.rows.append((model, run, "ERROR", short[:70], "", "", ""))
            rep.failures.append(f"{model} {run}: {e}")


def check_dp(args, tools, tmp, rep, nproc):
    """dp=N on N GPUs (NCCL) against one GPU on the same global batch."""
    for model, run in (("mlp", "sgd"), ("gpt", "adam")):
        golden = np.load(os.path.join(args.golden, f"{model}.npz"))
        meta = json.loads(str(golden["meta"]))
        if int(meta["batch"]) % nproc:  # the global batch is split evenly over the ranks
            meta["batch"] = int(meta["batch"]) * nproc
        data = os.path.join(args.golden, f"{model}_data.npz")
        onnx_path = os.path.join(ROOT, "models", meta["onnx"])
        flags = train_flags(meta, meta[run]) + ["--device", DEVICE]
        saved = {}
        try:
            for strategy in ("single", f"dp={nproc}"):
                plan = os.path.join(tmp, f"dp_{model}_{strategy.replace('=', '')}.dtc")
                f = list(flags)
                f[f.index("--strategy") + 1] = strategy
                tp.run_tool([tools["dtc-compile"], onnx_path, "-o", plan] + f, "dtc-compile")
                o = os.path.join(tmp, f"dp_{model}_{strategy.replace('=', '')}.npz")
                cmd = [tools["dtc-run"], plan, "--data", data, "--steps", "5", "--no-shuffle",
                       "--save-params", o, "--quiet"]
                if strategy != "single":
                    cmd += ["--nproc", str(nproc), "--timeout", "120"]
                tp.run_tool(cmd, f"dtc-run ({strategy})")
                saved[strategy] = np.load(o)
            single, dp = saved["single"], saved[f"dp={nproc}"]
            pairs = [(f"param/{k}", dp[k], single[k]) for k in single.files if k in dp.files]
            worst, failures = compare(pairs, None, args, lambda k: args.param_rtol)
            if sorted(single.files) != sorted(dp.files):
                failures.append(f"saved tensors differ: {sorted(single.files)} vs {sorted(dp.files)}")
            rep.row(model, f"dp={nproc} vs single ({run})", worst, "-", failures)
        except (tp.ToolError, OSError, ValueError, KeyError) as e:
            short = e.short if isinstance(e, tp.ToolError) else str(e).splitlines()[0]
            rep.rows.append((model, f"dp={nproc}", "ERROR", short[:70], "", "", ""))
            rep.failures.append(f"{model} dp={nproc}: {e}")


def main():
    ap = argparse.ArgumentParser(description="dtc on CUDA against dtc on the CPU (and PyTorch)")
    ap.add_argument("--build", required=True, help="build directory (BUILD/tools/dtc-*)")
    ap.add_argument("--models", default=",".join(tp.MODELS))
    ap.add_argument("--runs", default=",".join(RUNS), help=f"subset of {','.join(RUNS)}")
    ap.add_argument("--dp", type=int, default=0, help="also check dp=N on N GPUs (NCCL)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="the device under test; cpu: a dry run of this script against itself "
                    "on a machine without a GPU")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--param-rtol", type=float, default=1e-3)
    ap.add_argument("--noise-factor", type=float, default=10.0)
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests", "e2e", "golden"))
    args = ap.parse_args()
    args.runs = [r for r in args.runs.split(",") if r]
    for r in args.runs:
        if r not in RUNS:
            print(f"error: unknown run '{r}' (known: {', '.join(RUNS)})", file=sys.stderr)
            return 2
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in tp.MODELS:
            print(f"error: unknown model '{m}' (known: {', '.join(tp.MODELS)})", file=sys.stderr)
            return 2
    tools = {t: os.path.join(args.build, "tools", t) for t in ("dtc-compile", "dtc-run")}
    for t, p in tools.items():
        if not os.access(p, os.X_OK):
            print(f"error: {t} not found at {p} (build it: ninja -C {args.build} {t})",
                  file=sys.stderr)
            return 1

    tmp = tempfile.mkdtemp(prefix="dtc_gpu_parity_")
    rep = Report(args)
    global DEVICE
    DEVICE = args.device
    try:
        reason = gpu_unusable(tools, tmp) if DEVICE == "cuda" else None
        if reason:
            print(f"SKIP: no usable GPU: {reason}")
            print("gpu_parity: 0 passed, 0 failed, 1 skipped")
            return SKIP_CODE
        for m in models:
            check_model(m, args, tools, tmp, rep)
        if args.dp >= 2:
            check_dp(args, tools, tmp, rep, args.dp)
    except tp.ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    header = ("model", "run", "result", "worst tensor (cuda vs cpu)", "err", "tol", "vs torch")
    widths = [max(len(str(r[i])) for r in rep.rows + [header]) for i in range(len(header))]
    for r in [header] + rep.rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    failed = len(rep.rows) - rep.passed
    if rep.failures:
        print(f"\n{len(rep.failures)} failure(s):", file=sys.stderr)
        for f in rep.failures:
            print("FAIL " + f, file=sys.stderr)
    print(f"gpu_parity: {rep.passed} passed, {failed} failed, 0 skipped")
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())
