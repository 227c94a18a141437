#!/usr/bin/python3
"""PyTorch training goldens for dtc's end-to-end training parity test (tests/e2e/train_parity.py).

Run with Debian's Python, which has PyTorch 1.13 and onnx (the `python3` on PATH has no torch):
    /usr/bin/python3 tests/e2e/train_golden.py [--models mlp,cnn] [--out tests/e2e/golden]
Deterministic: the same files on every run (about 3 minutes on one core).

For every model (mlp, cnn, resnet, unet, gpt; the ONNX files are models/mlp.onnx and
models/<name>_train.onnx) the module is re-created from models/export_models.py as its export
did (torch.manual_seed(0), then the constructor); its BatchNorm running statistics are copied
from the ONNX file (the training export traced the module in training mode, which moved them off
0 and 1); then every parameter and buffer is checked equal to the ONNX initializer of the same
name. Everything runs in float32 on one thread, BatchNorm in training mode (batch statistics;
running statistics updated with PyTorch's unbiased variance). Loss: torch.nn.CrossEntropyLoss
(mean); the GPT's (N,16,64) logits are scored along the last axis (dtc-compile --class-axis -1).

Written per model:
  golden/<model>_data.npz  the dataset as dtc-run --data reads it: the model input ("input" f32,
                 or "tokens" i64) and "label" (i64); 20*B samples; with --no-shuffle step k uses
                 samples [k*B, (k+1)*B). numpy RandomState(seed) values: inputs are normal values
                 rounded to multiples of 1/16 (exact in float32, small compressed files); labels
                 uniform in [0,10) (classifiers), per pixel in [0,3) (unet, (N,32,32)), or the
                 next tokens of random 17-token sequences in [0,64) (gpt).
  golden/<model>.npz  meta          JSON string: batch, steps, seed, hyperparameters
                 grad/<p>           gradient of every parameter p at the initial weights on batch
                                    0 (dtc: the step of SGD lr 0.1); grad_loss: its loss, (1,)
                 sgd_loss           loss of each of 20 steps of SGD lr 0.05, momentum 0.9
                                    (PyTorch's rule: buf = m*buf + g, p -= lr*buf)
                 sgd_param/<p>, sgd_buffer/<b>: parameters and BatchNorm running statistics
                                    after them
                 adam_loss, adam_param/<p>, adam_buffer/<b>: the same for Adam lr 1e-3, betas
                                    (0.9, 0.999), eps 1e-8
                 zero_mask/<p>      (bool, only where some are true) the elements of p whose
                                    gradient is zero at every step in exact arithmetic (a conv
                                    bias feeding BatchNorm, the attention's key bias): their
                                    float32 gradient is rounding noise, which Adam turns into
                                    full-size steps, so Adam's value there is not comparable
                 noise/<key>        for every key above: max|x32 - x| / max|x32| between the
                                    golden and the farthest of two reruns, one in float64 and one
                                    in float32 from initial weights moved by one ulp: how much
                                    float32 rounding alone moves the result (Adam parameters:
                                    over the elements outside zero_mask).
Keys are the state_dict names, which are the ONNX initializer names; the loss of step k is the
loss of that step's forward pass (before its update).

Why noise: the conv models have ReLUs after BatchNorm, and a pre-activation within rounding
error of 0 (a few per 20-step run) flips the ReLU mask and moves the gradient by ~1% of its
size; over 20 steps such flips move the UNet's and ResNet's parameters far more than 1e-4. The
parity test allows max(1e-4, 10 * noise) per tensor. The data seed is the first one from the
model's base seed whose step 0 has every ReLU input at least 1e-6 * its max away from 0 and
float32 gradients within 1e-5 of float64, so the step-0 gradient check stays at 1e-4.
"""
import argparse
import importlib.util
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

STEPS = 20
# model -> (export_models name, ONNX file, input name, batch, base data seed)
MODELS = {
    "mlp": ("mlp", "mlp.onnx", "input", 8, 100),
    "cnn": ("cnn", "cnn_train.onnx", "input", 4, 200),
    "resnet": ("resnet", "resnet_train.onnx", "input", 4, 300),
    "unet": ("unet", "unet_train.onnx", "input", 4, 400),
    "gpt": ("gpt", "gpt_train.onnx", "tokens", 8, 500),
}
GRAD = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.0}
SGD = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9}
ADAM = {"optimizer": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8}


class ReluMargin:
    """Context manager: while active, `worst` is the smallest min|x| / max|x| over the inputs of
    every F.relu call (nn.ReLU calls it too): how close a ReLU mask came to flipping."""

    def __enter__(self):
        self.worst = float("inf")
        self._relu = torch.nn.functional.relu

        def relu(x, inplace=False):
            a = x.detach().abs()
            if a.numel():
                self.worst = min(self.worst, (a.min() / a.max().clamp_min(1e-30)).item())
            return self._relu(x, inplace)

        torch.nn.functional.relu = relu
        return self

    def __exit__(self, *exc):
        torch.nn.functional.relu = self._relu
        return False


def load_export_models():
    spec = importlib.util.spec_from_file_location(
        "export_models", os.path.join(ROOT, "models", "export_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_data(model, batch, seed):
    """The dataset of `model`: {input name: array, "label": int64 array}, 20*batch samples."""
    rs = np.random.RandomState(seed)
    n = STEPS * batch
    if model == "gpt":
        seq = rs.randint(0, 64, size=(n, 17)).astype(np.int64)
        return {"tokens": seq[:, :16].copy(), "label": seq[:, 1:].copy()}
    shape = (n, 784) if model == "mlp" else (n, 3, 32, 32)
    x = (np.round(rs.standard_normal(shape) * 16.0) / 16.0).astype(np.float32)
    if model == "unet":
        label = rs.randint(0, 3, size=(n, 32, 32)).astype(np.int64)
    else:
        label = rs.randint(0, 10, size=(n,)).astype(np.int64)
    return {"input": x, "label": label}


def onnx_initializers(onnx_file):
    import onnx  # Debian's python3-onnx; needed for the exported running statistics
    from onnx import numpy_helper

    path = os.path.join(ROOT, "models", onnx_file)
    return path, {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def new_module(em, model, dtype):
    """The module as exported: seeded constructor (parameters), then the ONNX file's buffers.
    The training export traced the module in training mode, which updated its BatchNorm running
    statistics, so the running statistics are taken from the ONNX initializers."""
    name, onnx_file = MODELS[model][:2]
    torch.manual_seed(0)
    module = em.model_specs()[name][0]()
    module.train()
    _, inits = onnx_initializers(onnx_file)
    with torch.no_grad():
        for n, b in module.named_buffers():
            if n in inits:
                b.copy_(torch.from_numpy(inits[n].copy()))
    return module.to(dtype)


def check_initial_weights(em, model):
    """Every parameter and buffer of the module equals the ONNX initializer of the same name."""
    path, inits = onnx_initializers(MODELS[model][1])
    module = new_module(em, model, torch.float32)
    for name, value in module.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        if name not in inits:
            sys.exit(f"error: {path}: no initializer named '{name}'")
        if not np.array_equal(inits[name], value.numpy()):
            sys.exit(f"error: {path}: initializer '{name}' differs from the re-created module")
    params = [n for n, _ in module.named_parameters()]
    print(f"  initial weights equal the ONNX initializers ({len(params)} parameters)")


def loss_of(model, logits, label):
    if model == "gpt":  # (N,T,V) scored along V: CrossEntropyLoss wants the classes on axis 1
        return F.cross_entropy(logits.transpose(1, 2), label)
    return F.cross_entropy(logits, label)


def train(em, model, data, config, steps, dtype, perturb=False):
    """Runs `steps` steps of `config` from the initial weights on batches in file order
    (perturb: every initial parameter moved by one ulp up or down, RandomState(7) signs).
    Returns (losses, gradients of the first step, parameters, buffers) as float32 numpy, and
    the largest |gradient| each parameter element had over the steps (float64 numpy)."""
    _, _, input_name, batch, _ = MODELS[model]
    module = new_module(em, model, dtype)
    if perturb:
        rs = np.random.RandomState(7)
        with torch.no_grad():
            for p in module.parameters():
                up = torch.from_numpy(rs.randint(0, 2, size=tuple(p.shape)).astype(bool))
                inf = torch.full_like(p, float("inf"))
                p.copy_(torch.where(up, torch.nextafter(p, inf), torch.nextafter(p, -inf)))
    if config["optimizer"] == "sgd":
        opt = torch.optim.SGD(module.parameters(), lr=config["lr"], momentum=config["momentum"])
    else:
        opt = torch.optim.Adam(module.parameters(), lr=config["lr"], betas=tuple(config["betas"]),
                               eps=config["eps"])
    x_all = torch.from_numpy(data[input_name])
    if x_all.is_floating_point():
        x_all = x_all.to(dtype)
    y_all = torch.from_numpy(data["label"])
    losses, first_grads = [], None
    grad_max = {n: torch.zeros_like(p) for n, p in module.named_parameters()}
    for k in range(steps):
        x, y = x_all[k * batch:(k + 1) * batch], y_all[k * batch:(k + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, module(x), y)
        loss.backward()
        if k == 0:
            first_grads = {n: p.grad.detach().to(torch.float32).numpy().copy()
                           for n, p in module.named_parameters() if p.grad is not None}
        for n, p in module.named_parameters():
            if p.grad is not None:
                grad_max[n] = torch.maximum(grad_max[n], p.grad.detach().abs())
        opt.step()
        losses.append(float(loss.item()))
    params = {n: p.detach().to(torch.float32).numpy().copy() for n, p in module.named_parameters()}
    buffers = {n: b.detach().to(torch.float32).numpy().copy() for n, b in module.named_buffers()
               if n.endswith("running_mean") or n.endswith("running_var")}
    grad_max = {n: g.to(torch.float64).numpy() for n, g in grad_max.items()}
    return np.array(losses, dtype=np.float32), first_grads, params, buffers, grad_max




def rel(a, b):
    """max|a - b| / max|b| (0 for empty tensors)."""
    if b.size == 0:
        return 0.0
    b64 = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(np.asarray(a, np.float64) - b64))) / max(
        float(np.max(np.abs(b64))), 1e-30)


def grad_check_ok(em, model, data):
    """(ok, float64 gradients of step 0): whether step 0 of `data` is well-conditioned."""
    with ReluMargin() as margin:
        g32 = train(em, model, data, GRAD, 1, torch.float32)[1]
    g64 = train(em, model, data, GRAD, 1, torch.float64)[1]
    scale = max(float(np.max(np.abs(g))) for g in g64.values())
    worst = max(rel(g32[n], g64[n]) if np.max(np.abs(g64[n])) >= 1e-9 * scale else 0.0
                for n in g32)
    return margin.worst >= 1e-6 and worst <= 1e-5, g64


def golden(em, model, out_dir):
    onnx_file, _, batch, base_seed = MODELS[model][1:]
    print(f"{model}: batch {batch}, {STEPS} steps")
    check_initial_weights(em, model)
    for seed in range(base_seed, base_seed + 100):
        data = make_data(model, batch, seed)
        ok, g64 = grad_check_ok(em, model, data)
        if ok:
            break
        print(f"  data seed {seed}: step 0 is ill-conditioned (a ReLU input near 0), next seed")
    else:
        sys.exit(f"error: {model}: no well-conditioned data seed in 100 tries")
    np.savez_compressed(os.path.join(out_dir, f"{model}_data.npz"), **data)

    out, noise, masks = {}, {}, {}
    g_loss, grads = train(em, model, data, GRAD, 1, torch.float32)[:2]
    gp = train(em, model, data, GRAD, 1, torch.float32, perturb=True)[1]
    out["grad_loss"] = g_loss
    for n, g in grads.items():
        out[f"grad/{n}"] = g
        noise[f"grad/{n}"] = max(rel(g64[n], g), rel(gp[n], g))
    for kind, cfg in (("sgd", SGD), ("adam", ADAM)):
        runs = [train(em, model, data, cfg, STEPS, torch.float32)]
        runs.append(train(em, model, data, cfg, STEPS, torch.float64))
        runs.append(train(em, model, data, cfg, STEPS, torch.float32, perturb=True))
        ref = runs[0]
        if kind == "adam":  # elements whose gradient is 0 at every step in exact arithmetic
            scale = max(float(np.max(g)) for g in runs[1][4].values())
            for n, g in runs[1][4].items():
                if np.any(g < 1e-9 * scale):
                    masks[n] = g < 1e-9 * scale
        out[f"{kind}_loss"] = ref[0]
        noise[f"{kind}_loss"] = max(rel(r[0], ref[0]) for r in runs[1:])
        for slot, prefix in ((2, "param"), (3, "buffer")):
            for n, v in ref[slot].items():
                keep = ~masks[n] if prefix == "param" and n in masks else np.ones(v.shape, bool)
                out[f"{kind}_{prefix}/{n}"] = v
                noise[f"{kind}_{prefix}/{n}"] = max(rel(r[slot][n][keep], v[keep])
                                                    for r in runs[1:])
        print(f"  {kind}: loss {ref[0][0]:.5f} -> {ref[0][-1]:.5f}")
    for n, m in masks.items():
        out[f"zero_mask/{n}"] = m
    zero_grad = sorted(n for n, m in masks.items() if m.all())
    if masks:
        print("  analytically zero gradient elements (Adam ignores them): " +
              ", ".join(f"{n} {int(m.sum())}/{m.size}" for n, m in sorted(masks.items())))
    for k, v in noise.items():
        out[f"noise/{k}"] = np.array(v, dtype=np.float32)
    noisy = sorted(((v, k) for k, v in noise.items()
                    if v > 1e-5 and k.split("/", 1)[-1] not in zero_grad), reverse=True)
    if noisy:
        print(f"  {len(noisy)} results move by over 1e-5 under float32 rounding; worst: " +
              ", ".join(f"{k} {v:.1e}" for v, k in noisy[:3]))
    meta = {"model": model, "onnx": onnx_file, "batch": batch, "steps": STEPS, "seed": seed,
            "grad": GRAD, "sgd": SGD, "adam": ADAM, "loss": "softmax-cross-entropy",
            "class_axis": -1 if model == "gpt" else 1}
    out["meta"] = np.array(json.dumps(meta, sort_keys=True))
    np.savez_compressed(os.path.join(out_dir, f"{model}.npz"), **out)


def main():
    ap = argparse.ArgumentParser(description="write dtc's PyTorch training goldens")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--out", default=os.path.join(HERE, "golden"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    em = load_export_models()
    os.makedirs(args.out, exist_ok=True)
    for model in [m for m in args.models.split(",") if m]:
        if model not in MODELS:
            sys.exit(f"error: unknown model '{model}' (known: {', '.join(MODELS)})")
        golden(em, model, args.out)


if __name__ == "__main__":
    main()
