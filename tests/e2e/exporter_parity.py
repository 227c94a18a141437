#!/usr/bin/env python3
"""Today's exporters end to end: the Hugging Face GPT-2, BERT and ViT and torchvision's
VisionTransformer (tvvit) fixtures and the Keras U-Net (unet, tf2onnx) of
models/exporters/ (the PyTorch ones made by make_exporter_fixtures.py with torch.onnx.export's
dynamo path, opset 18; the U-Net by make_keras_fixtures.py; numpy and onnxruntime only here, no
torch or TensorFlow) through dtc.

For every PyTorch model and every export (default optimizer ``<m>.onnx``, ``optimize=False``
``<m>_noopt.onnx``, and ``<m>_merged.onnx``: the plain export with equal initializers merged by
the default optimizer's DeduplicateInitializersPass):
  infer  dtc-compile --inference, dtc-run --infer on the recorded input; the logits must match
         PyTorch's eval output: max|dtc - torch| / max|torch| <= --infer-rtol (1e-4).
For the exports whose initializers are the model's parameters:
  train  dtc-compile --loss softmax-cross-entropy (--class-axis -1 for GPT-2's (N, T, V)
         logits) --optimizer sgd --lr 0.1 --batch-size 4, dtc-run --steps 5 --no-shuffle on the
         recorded batch; the 5 losses must match PyTorch's (torch.optim.SGD on the same batch)
         within --train-rtol (2e-3) relative, elementwise.
  _noopt:   trains as PyTorch does, with no merged-initializer warning.
  _merged:  the training compile warns about each merged initializer (naming it); trained as
            is, the losses leave PyTorch's by more than --tied-min (1e-5; the merged weights
            train as one tied parameter);
            with --untie-initializers they match PyTorch's, and --export writes the untied
            model, whose trained logits (onnxruntime) match those of the trained _noopt export.
``gpt2_dyn.onnx`` (optimize=False, dynamic batch axis): infer at batch 4 and 2, train as above.

The Keras U-Net (``unet``: made by make_keras_fixtures.py with TensorFlow 2.15 and tf2onnx 1.16,
opset 15; channels-last (N, 16, 16, 3) images, per-pixel logits over 3 classes) in its three
exports, ``unet.onnx`` (tf2onnx's optimizers on), ``unet_noopt.onnx`` (optimizers off: every
Conv/MaxPool/Resize between NHWC<->NCHW Transposes) and ``unet_nchw.onnx`` (inputs_as_nchw and
outputs_as_nchw: (N, 3, 16, 16) in and out, the recorded arrays transposed to match):
  infer  as above, against TensorFlow's eval logits.
  train  --loss softmax-cross-entropy over every pixel, --class-axis -1 (channels-last logits)
         or 1 (unet_nchw), SGD lr 0.1, batch 4, 5 steps --no-shuffle; the losses must match
         TensorFlow's (tf.keras.optimizers.SGD on the same batch) within --train-rtol.
         tf2onnx writes every constant as an initializer, Resize's float ``scales`` too: the
         training compile must leave it untrained, warning that it is read only where no
         gradient flows (naming it), and still train the rest.
Prints one line per check; exits 1 if any fails.

Usage: exporter_parity.py --build BUILD_DIR [--models gpt2,bert,vit,tvvit,unet] [--keep]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "models", "exporters")
MODELS = {"gpt2": ("input_ids", ["--class-axis", "-1"]), "bert": ("input_ids", []),
          "vit": ("pixel_values", []), "tvvit": ("pixel_values", [])}
# Keras exports (make_keras_fixtures.py): name -> (input name, {variant: channels-first?}).
KERAS = {"unet": ("image", {"": False, "_noopt": False, "_nchw": True})}
BATCH = 4
STEPS = 5
LR = "0.1"


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def rel_err(got, ref):
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))),
                                                                        1e-30)


def read_losses(path):
    rows = []
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if j.get("event", "step") == "step" and "loss" in j and "step" in j:
                rows.append(float(j["loss"]))
    return np.array(rows, dtype=np.float64)


def infer(c, compile_, run_, onnx_path, inputs, stem, batch, what):
    """dtc-compile --inference at `batch`, then dtc-run --infer on `inputs` (files under
    `stem`); reports the run as `what` and returns the logits, or None when either failed."""
    plan, out = stem + "_inf.dtc", stem + "_out.npz"
    r = run([compile_, onnx_path, "--inference", "--batch-size", str(batch), "-o", plan])
    if r.returncode == 0:
        r = run([run_, plan, "--infer", "--inputs", inputs, "--outputs", out, "--threads", "1"])
    if not c.report(r.returncode == 0, what, "ran" if r.returncode == 0 else r.stderr.strip()):
        return None
    return np.load(out)["logits"]


class Checker:
    def __init__(self):
        self.failures = 0

    def report(self, ok, what, detail):
        print(f"{'PASS' if ok else 'FAIL'} {what}: {detail}", flush=True)
        if not ok:
            self.failures += 1
        return ok


def check_keras(model, args, compile_, run_, tmp, c):
    """Infers and trains each tf2onnx export of a Keras model against TensorFlow's records."""
    input_name, variants = KERAS[model]
    data = np.load(os.path.join(FIXTURES, f"{model}_data.npz"))
    ref = np.load(os.path.join(FIXTURES, f"{model}_ref.npz"))
    tf_losses = ref["losses"].astype(np.float64)
    for variant, nchw in variants.items():
        name = f"{model}{variant}"
        onnx_path = os.path.join(FIXTURES, f"{name}.onnx")
        x = data[input_name].transpose(0, 3, 1, 2) if nchw else data[input_name]
        inputs = os.path.join(tmp, f"{name}_in.npz")
        batch = os.path.join(tmp, f"{name}_data.npz")
        np.savez(inputs, **{input_name: x})
        np.savez(batch, **{input_name: x, "label": data["label"]})
        got = infer(c, compile_, run_, onnx_path, inputs, os.path.join(tmp, name), BATCH,
                    f"{name} infer")
        if got is not None:
            if nchw:
                got = got.transpose(0, 2, 3, 1)
            err = rel_err(got, ref["output"]) if got.shape == ref["output"].shape else np.inf
            c.report(err <= args.infer_rtol, f"{name} infer",
                     f"max relative error {err:.2e} (tolerance {args.infer_rtol:g})")

        plan = os.path.join(tmp, f"{name}.dtc")
        log = os.path.join(tmp, f"{name}.jsonl")
        r = run([compile_, onnx_path, "-o", plan, "--strategy", "single", "--loss",
                 "softmax-cross-entropy", "--class-axis", "1" if nchw else "-1", "--optimizer",
                 "sgd", "--lr", LR, "--batch-size", str(BATCH)])
        what = "dtc-compile: "
        if r.returncode == 0:
            scales = re.search(r"warning: parameter '(scales__\d+)': read only where no "
                               r"gradient flows \(input 2 of node '[^']+' \(Resize\)\)", r.stderr)
            c.report(bool(scales), f"{name} train",
                     f"'{scales.group(1)}' (Resize scales) left untrained with a warning"
                     if scales else "no warning about the Resize scales: " + r.stderr.strip())
            what = "dtc-run: "
            r = run([run_, plan, "--data", batch, "--steps", str(STEPS), "--no-shuffle",
                     "--threads", "1", "--print-every", "1", "--log", log])
        if not c.report(r.returncode == 0, f"{name} train",
                        "ran" if r.returncode == 0 else what + r.stderr.strip()):
            continue
        losses = read_losses(log)
        err = (float(np.max(np.abs(losses - tf_losses) / np.abs(tf_losses)))
               if losses.shape == tf_losses.shape else float("inf"))
        c.report(err <= args.train_rtol, f"{name} train",
                 f"5 SGD losses, max relative error {err:.2e} (tolerance {args.train_rtol:g})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--models", default=",".join(list(MODELS) + list(KERAS)))
    ap.add_argument("--infer-rtol", type=float, default=1e-4)
    ap.add_argument("--train-rtol", type=float, default=2e-3)
    ap.add_argument("--tied-min", type=float, default=1e-5,
                    help="how far (relative) the tied training of a merged export must leave "
                         "PyTorch's losses: 100 times the float32 noise of the matching runs")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    compile_ = os.path.join(args.build, "tools", "dtc-compile")
    run_ = os.path.join(args.build, "tools", "dtc-run")
    c = Checker()
    tmp = tempfile.mkdtemp(prefix="dtc-exporters-")
    for model in args.models.split(","):
        if model in KERAS:
            check_keras(model, args, compile_, run_, tmp, c)
            continue
        input_name, loss_flags = MODELS[model]
        data = os.path.join(FIXTURES, f"{model}_data.npz")
        ref = np.load(os.path.join(FIXTURES, f"{model}_ref.npz"))
        inputs = os.path.join(tmp, f"{model}_in.npz")
        np.savez(inputs, **{input_name: np.load(data)[input_name]})

        for variant in ("", "_noopt", "_merged"):
            onnx_path = os.path.join(FIXTURES, f"{model}{variant}.onnx")
            name = f"{model}{variant}"
            got = infer(c, compile_, run_, onnx_path, inputs, os.path.join(tmp, name), BATCH,
                        f"{name} infer")
            if got is None:
                continue
            err = rel_err(got, ref["output"])
            c.report(err <= args.infer_rtol, f"{name} infer",
                     f"max relative error {err:.2e} (tolerance {args.infer_rtol:g})")

        def train(variant, extra, tag):
            """Compiles and runs 5 SGD steps; returns (losses, compile stderr, export path)."""
            plan = os.path.join(tmp, f"{model}{variant}{tag}.dtc")
            log = os.path.join(tmp, f"{model}{variant}{tag}.jsonl")
            exported = os.path.join(tmp, f"{model}{variant}{tag}_trained.onnx")
            r = run([compile_, os.path.join(FIXTURES, f"{model}{variant}.onnx"), "-o", plan,
                     "--strategy", "single", "--loss", "softmax-cross-entropy", "--optimizer",
                     "sgd", "--lr", LR, "--batch-size", str(BATCH)] + loss_flags + extra)
            if r.returncode != 0:
                c.report(False, f"{model}{variant}{tag} train", "dtc-compile: " + r.stderr.strip())
                return None, r.stderr, None
            warnings = r.stderr
            r = run([run_, plan, "--data", data, "--steps", str(STEPS), "--no-shuffle",
                     "--threads", "1", "--print-every", "1", "--log", log, "--export", exported])
            if r.returncode != 0:
                c.report(False, f"{model}{variant}{tag} train", "dtc-run: " + r.stderr.strip())
                return None, warnings, None
            return read_losses(log), warnings, exported

        torch_losses = ref["losses"].astype(np.float64)
        dyn = os.path.join(FIXTURES, f"{model}_dyn.onnx")
        if os.path.exists(dyn):
            # A dynamic batch axis: bound at compile time, at the export's batch and another.
            for batch in (BATCH, 2):
                sub = os.path.join(tmp, f"{model}_dyn_in{batch}.npz")
                np.savez(sub, **{input_name: np.load(data)[input_name][:batch]})
                got = infer(c, compile_, run_, dyn, sub, os.path.join(tmp, f"{model}_dyn_b{batch}"),
                            batch, f"{model}_dyn infer batch {batch}")
                if got is None:
                    continue
                err = rel_err(got, ref["output"][:batch])
                c.report(err <= args.infer_rtol, f"{model}_dyn infer batch {batch}",
                         f"max relative error {err:.2e} (tolerance {args.infer_rtol:g})")

        def loss_err(losses):
            if losses is None or losses.shape != torch_losses.shape:
                return float("inf")
            return float(np.max(np.abs(losses - torch_losses) / np.abs(torch_losses)))

        losses, warnings, noopt_export = train("_noopt", [], "")
        if losses is not None:
            err = loss_err(losses)
            c.report(err <= args.train_rtol, f"{model}_noopt train",
                     f"5 SGD losses, max relative error {err:.2e} (tolerance {args.train_rtol:g})")
            c.report("tied parameter" not in warnings, f"{model}_noopt train",
                     "no merged-initializer warning")

        losses, warnings, _ = train("_merged", [], "")
        if losses is not None:
            named = [line for line in warnings.splitlines() if "tied parameter" in line]
            c.report(bool(named) and "--untie-initializers" in named[0],
                     f"{model}_merged train", f"{len(named)} merged-initializer warnings" +
                     (f", e.g. {named[0][:140]}..." if named else ""))
            err = loss_err(losses)
            c.report(err > args.tied_min, f"{model}_merged train (tied)",
                     f"losses leave PyTorch's: max relative error {err:.2e} (> {args.tied_min:g})")

        if os.path.exists(dyn):
            losses, _, _ = train("_dyn", [], "")
            if losses is not None:
                err = loss_err(losses)
                c.report(err <= args.train_rtol, f"{model}_dyn train",
                         f"5 SGD losses, max relative error {err:.2e} (tolerance "
                         f"{args.train_rtol:g})")

        losses, warnings, merged_export = train("_merged", ["--untie-initializers"], "_untied")
        if losses is not None:
            err = loss_err(losses)
            c.report(err <= args.train_rtol, f"{model}_merged --untie-initializers train",
                     f"5 SGD losses, max relative error {err:.2e} (tolerance {args.train_rtol:g})")
            c.report("tied parameter" not in warnings, f"{model}_merged --untie-initializers",
                     "no merged-initializer warning")
        if noopt_export and merged_export:
            import onnxruntime as ort
            feeds = dict(np.load(inputs))
            outs = []
            for path in (noopt_export, merged_export):
                so = ort.SessionOptions()
                so.log_severity_level = 3  # onnxruntime's notes on CastLike folding are noise
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                outs.append(sess.run(None, feeds)[0])
            err = rel_err(outs[1], outs[0])
            c.report(err <= args.train_rtol, f"{model}_merged --untie-initializers --export",
                     f"trained logits vs the trained _noopt export's, max relative error "
                     f"{err:.2e}")
            moved = rel_err(outs[1], ref["output"])
            c.report(moved > 10 * args.infer_rtol, f"{model}_merged --untie-initializers --export",
                     f"the exported weights are the trained ones (logits moved {moved:.2e} "
                     f"from the initial model's)")
            import onnx
            names = [t.name for t in onnx.load(merged_export).graph.initializer]
            copies = [n for n in names if ".untied." in n]
            c.report(bool(copies), f"{model}_merged --untie-initializers --export",
                     f"{len(copies)} untied copies among {len(names)} initializers")
    if args.keep:
        print("kept", tmp)
    else:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'FAILED' if c.failures else 'OK'}: {c.failures} failed check(s)")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
