#!/usr/bin/env python3
"""End-to-end training parity of dtc against PyTorch goldens (numpy only, no torch).

For every model with a golden (tests/e2e/golden/<model>.npz and <model>_data.npz, written by
tests/e2e/train_golden.py) it compiles three training plans with dtc-compile (--strategy single
--loss softmax-cross-entropy, the golden's batch size, --class-axis -1 for the GPT) and runs
each with dtc-run on the golden data (--no-shuffle):
  grad  SGD lr 0.1, --steps 1 --dump-gradients: the gradient of every parameter at the initial
        weights, and the step's loss
  sgd   SGD lr 0.05 momentum 0.9, --steps 20 --save-params: each step's loss (from --log), the
        final parameters and, when dtc saves them, the BatchNorm running statistics
  adam  Adam lr 1e-3 betas 0.9,0.999 eps 1e-8, --steps 20: the same
Each tensor (and each run's loss vector) passes when
    err = max|dtc - torch| / max(max|torch|, 1e-30)  <=  tol = max(rtol, noise_factor * noise)
with rtol = 1e-4 (the target for gradients and losses) and noise_factor = 10 by default; the
parameters after 20 steps (and running statistics), a check beyond the losses, use
param_rtol = 1e-3 instead of rtol: 20 steps with momentum or Adam amplify the different
summation order of oneDNN's reductions (BatchNorm statistics, convolution weight gradients)
to a few 1e-4 on the CNN; noise is the golden's measure of how far
float32 rounding alone moves that result (train_golden.py explains it; it is tiny except for
the multi-step results of the ReLU+BatchNorm models, where a pre-activation within rounding of
0 flips a mask). Elements whose gradient is zero in exact arithmetic (the golden's zero_mask)
are left out of the Adam parameter check; a gradient that is entirely such noise is compared
against the largest gradient of the model instead of its own maximum.
Prints one table row per (model, run) with the worst tensor (largest err/tol); exits 1 if a
check fails or dtc-compile / dtc-run fail (their stderr is printed), naming model, run and
tensor.

Usage: train_parity.py --build BUILD_DIR [--models mlp,gpt] [--keep] [--rtol 1e-4]
                       [--noise-factor 10] [--golden DIR]
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = ["mlp", "cnn", "resnet", "unet", "gpt"]
TINY = 1e-30


class ToolError(Exception):
    """A failed tool or an unreadable output; `short` is the table's one-line summary."""

    def __init__(self, message, short=None):
        super().__init__(message)
        self.short = short or message.splitlines()[0]


def run_tool(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        err = r.stderr.strip() or r.stdout.strip() or "(no output)"
        raise ToolError(f"{what} failed (exit {r.returncode}): {shlex.join(cmd)}\n{err}",
                        f"{what}: {err.splitlines()[-1]}")
    return r


def compile_flags(meta, cfg):
    flags = ["--strategy", "single", "--loss", meta["loss"], "--optimizer", cfg["optimizer"],
             "--lr", repr(cfg["lr"]), "--batch-size", str(meta["batch"])]
    if cfg["optimizer"] == "sgd" and cfg.get("momentum", 0.0):
        flags += ["--momentum", repr(cfg["momentum"])]
    if cfg["optimizer"] == "adam":
        flags += ["--betas", ",".join(repr(b) for b in cfg["betas"]), "--eps", repr(cfg["eps"])]
    if meta["class_axis"] != 1:
        flags += ["--class-axis", str(meta["class_axis"])]
    return flags


def read_losses(log_path, steps):
    """The per-step losses of a dtc-run --log file (JSON lines with "step" and "loss")."""
    rows = []
    with open(log_path) as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError as e:
                raise ToolError(f"{log_path}:{i + 1}: not JSON ({e}): {line.strip()[:100]}")
            if j.get("event", "step") == "step" and "step" in j and "loss" in j:
                rows.append((int(j["step"]), float(j["loss"])))
    rows.sort()
    if len(rows) != steps:
        raise ToolError(f"{log_path}: {len(rows)} step lines with a loss, expected {steps}")
    return np.array([loss for _, loss in rows], dtype=np.float64)


def rel_err(got, want, scale=None):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if want.size == 0:
        return 0.0
    if not np.all(np.isfinite(got)):
        return float("inf")
    if scale is None:
        scale = float(np.max(np.abs(want)))
    return float(np.max(np.abs(got - want))) / max(scale, TINY)


class Checker:
    """Collects per-tensor results of one (model, run)."""

    def __init__(self, golden, rtol, factor, param_rtol):
        self.golden, self.rtol, self.factor = golden, rtol, factor
        self.param_rtol = param_rtol
        self.rows = []      # (err/tol, name, err, tol)
        self.failures = []  # messages
        self.notes = []

    def tol(self, key):
        noise_key = "noise/" + key
        noise = float(self.golden[noise_key]) if noise_key in self.golden.files else 0.0
        multi_step = key.split("/")[0] in ("sgd_param", "adam_param", "sgd_buffer", "adam_buffer")
        return max(self.param_rtol if multi_step else self.rtol, self.factor * noise)

    def check(self, key, got, want, scale=None, mask=None):
        got = np.asarray(got)
        if got.shape != want.shape:
            self.failures.append(f"tensor '{key}': dtc shape {got.shape}, PyTorch {want.shape}")
            self.rows.append((float("inf"), key, float("inf"), self.tol(key)))
            return
        if mask is not None:
            got, want = got[~mask], want[~mask]
        err, tol = rel_err(got, want, scale), self.tol(key)
        self.rows.append((err / tol, key, err, tol))
        if not err <= tol:
            self.failures.append(f"tensor '{key}': error {err:.2e} > tolerance {tol:.1e}")

    def missing(self, key, file, what):
        self.failures.append(f"tensor '{key}': no array '{what}' in {file}")
        self.rows.append((float("inf"), key, float("inf"), self.tol(key)))


def check_model(model, args, tools, tmp):
    """Returns (table rows, failure messages) for one model."""
    gpath = os.path.join(args.golden, f"{model}.npz")
    data = os.path.join(args.golden, f"{model}_data.npz")
    for p in (gpath, data):
        if not os.path.exists(p):
            return [], [f"{model}: missing golden {p} (run tests/e2e/train_golden.py)"]
    golden = np.load(gpath)
    meta = json.loads(str(golden["meta"]))
    onnx_path = os.path.join(ROOT, "models", meta["onnx"])
    steps = int(meta["steps"])
    params = sorted(k[len("grad/"):] for k in golden.files if k.startswith("grad/"))
    masks = {k[len("zero_mask/"):]: golden[k] for k in golden.files if k.startswith("zero_mask/")}
    grad_scale = max(float(np.max(np.abs(golden["grad/" + p]))) for p in params)

    rows, failures = [], []
    for run in ("grad", "sgd", "adam"):
        cfg = meta[run]
        c = Checker(golden, args.rtol, args.noise_factor, args.param_rtol)
        plan = os.path.join(tmp, f"{model}_{run}.dtc")
        log = os.path.join(tmp, f"{model}_{run}.jsonl")
        out = os.path.join(tmp, f"{model}_{run}_{'grads' if run == 'grad' else 'params'}.npz")
        n = 1 if run == "grad" else steps
        try:
            run_tool([tools["dtc-compile"], onnx_path, "-o", plan] + compile_flags(meta, cfg),
                     "dtc-compile")
            cmd = [tools["dtc-run"], plan, "--data", data, "--steps", str(n), "--no-shuffle",
                   "--log", log]
            cmd += ["--dump-gradients", out] if run == "grad" else ["--save-params", out]
            run_tool(cmd, "dtc-run")
            losses = read_losses(log, n)
            got = np.load(out)
        except (ToolError, OSError, ValueError) as e:
            msg = f"{model} {run}: {e}"
            failures.append(msg)
            short = e.short if isinstance(e, ToolError) else str(e).splitlines()[0]
            rows.append((model, run, "ERROR", "-", short[:80], "", ""))
            continue

        if run == "grad":
            c.check("grad_loss", losses, golden["grad_loss"].astype(np.float64))
            for p in params:
                if p not in got.files:
                    c.missing("grad/" + p, os.path.basename(out), p)
                    continue
                want = golden["grad/" + p]
                fully_zero = p in masks and masks[p].all()
                c.check("grad/" + p, got[p], want, scale=grad_scale if fully_zero else None)
        else:
            c.check(f"{run}_loss", losses, golden[f"{run}_loss"].astype(np.float64))
            for p in params:
                key = f"{run}_param/{p}"
                if p not in got.files:
                    c.missing(key, os.path.basename(out), p)
                    continue
                mask = masks.get(p) if run == "adam" else None
                if mask is not None and mask.all():
                    c.notes.append(f"{p} skipped (gradient zero in exact arithmetic)")
                    continue
                c.check(key, got[p], golden[key], mask=mask)
            buffers = [k for k in golden.files if k.startswith(f"{run}_buffer/")]
            unsaved = [k for k in buffers if k.split("/", 1)[1] not in got.files]
            for key in buffers:
                if key not in unsaved:
                    c.check(key, got[key.split("/", 1)[1]], golden[key])
            if unsaved:
                c.notes.append(f"{len(unsaved)} running statistics not in --save-params: "
                               "not checked")
        c.rows.sort(reverse=True)
        ratio, worst, err, tol = c.rows[0] if c.rows else (0.0, "-", 0.0, args.rtol)
        loss_key = "grad_loss" if run == "grad" else f"{run}_loss"
        loss_err = next((r[2] for r in c.rows if r[1] == loss_key), float("nan"))
        rows.append((model, run, "FAIL" if c.failures else "ok", f"{loss_err:.1e}", worst,
                     f"{err:.1e}", f"{tol:.0e}"))
        failures += [f"{model} {run}: {m}" for m in c.failures]
        for note in c.notes:
            print(f"note: {model} {run}: {note}")
    return rows, failures


def main():
    ap = argparse.ArgumentParser(description="dtc training parity against PyTorch goldens")
    ap.add_argument("--build", required=True, help="build directory (dtc-compile and dtc-run "
                    "under BUILD/tools)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--param-rtol", type=float, default=1e-3,
                    help="rtol of the parameters and running statistics after 20 steps")
    ap.add_argument("--noise-factor", type=float, default=10.0,
                    help="tolerance = max(rtol, factor * the golden's float32 noise)")
    ap.add_argument("--golden", default=os.path.join(HERE, "golden"))
    args = ap.parse_args()

    tools = {t: os.path.join(args.build, "tools", t) for t in ("dtc-compile", "dtc-run")}
    for t, p in tools.items():
        if not os.access(p, os.X_OK):
            print(f"error: {t} not found at {p} (build it: ninja -C {args.build} {t})",
                  file=sys.stderr)
            return 1
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            print(f"error: unknown model '{m}' (known: {', '.join(MODELS)})", file=sys.stderr)
            return 2

    tmp = tempfile.mkdtemp(prefix="dtc_train_parity_")
    rows, failures = [], []
    try:
        for m in models:
            r, f = check_model(m, args, tools, tmp)
            rows += r
            failures += f
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)

    header = ("model", "run", "result", "loss err", "worst tensor", "err", "tol")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    if failures:
        print(f"\n{len(failures)} failure(s):", file=sys.stderr)
        for f in failures:
            print("FAIL " + f, file=sys.stderr)
        return 1
    print(f"\nall {len(rows)} runs match PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
