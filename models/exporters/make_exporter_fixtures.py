#!/usr/bin/env python3
# Makes the issue-12 fixtures: tiny random-init Hugging Face GPT-2, BERT and ViT and
# torchvision's VisionTransformer ("tvvit", its zero-initialized head re-drawn) exported by
# today's torch.onnx.export (its default, dynamo-based path, opset 18), each twice: with the
# exporter's default optimizer (which merges initializers of equal value, e.g. every LayerNorm's
# ones and every zero bias) and with optimize=False. Beside each pair it records what PyTorch
# itself computes, so tests need neither torch nor transformers:
#   <name>.onnx, <name>_noopt.onnx   the two exports (weights embedded, static shapes)
#   gpt2_dyn.onnx                    GPT-2's optimize=False export with a dynamic batch axis
#   <name>_merged.onnx               the optimize=False export after the default optimizer's
#                                    DeduplicateInitializersPass alone (onnx_ir): equal
#                                    initializers merged, nothing folded
#   <name>_data.npz                  the model input (named as the ONNX input) and "label"
#   <name>_ref.npz                   "output": the eval-mode output for that input;
#                                    "losses": the loss before each of 5 full-batch SGD steps
#                                    (torch.optim.SGD, lr LR, no momentum, no weight decay)
# The loss is the one `dtc-compile --loss softmax-cross-entropy` attaches:
# torch.nn.CrossEntropyLoss (mean) over the logits, class axis last (--class-axis -1 for GPT-2).
# Dropout probabilities are 0, so training and eval forward passes are the same function.
#
# Run once, in a virtual environment outside the repository (CI does not install torch):
#     python3 -m venv /work/venv-export
#     /work/venv-export/bin/pip install torch torchvision transformers onnx onnxscript onnxruntime
#     /work/venv-export/bin/python models/exporters/make_exporter_fixtures.py [--out DIR]
# It checks each export with onnxruntime against the PyTorch output and prints the error.
# Re-running it gives byte-identical files (checked with torch 2.15.0, torchvision 0.29.2,
# transformers 5.25.0, onnx 1.23.2, onnxscript 0.7.2, onnx_ir 1.1.0, onnxruntime 1.32.0).
import argparse
import json
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 4
SEQ = 16
STEPS = 5
LR = 0.1


class Logits(torch.nn.Module):
    """The Hugging Face model with only its logits as output (no cache, no dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        if not hasattr(self.model, "config"):  # torchvision: the logits already
            return self.model(x)
        if hasattr(self.model, "vit"):
            return self.model(pixel_values=x, return_dict=False)[0]
        return self.model(x, return_dict=False)[0]


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=96, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2,
                     n_inner=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     use_cache=False, attn_implementation="eager")
    model = GPT2LMHeadModel(cfg)  # lm_head.weight is tied to transformer.wte.weight
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=g)
    label = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=g)
    return model, "input_ids", x, label, cfg.vocab_size


def bert():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=SEQ, num_labels=3,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     classifier_dropout=0.0, attn_implementation="eager")
    model = BertForSequenceClassification(cfg)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=g)
    label = torch.randint(0, cfg.num_labels, (BATCH,), generator=g)
    return model, "input_ids", x, label, cfg.num_labels


def vit():
    from transformers import ViTConfig, ViTForImageClassification
    cfg = ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                    num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                    num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    attn_implementation="eager")
    model = ViTForImageClassification(cfg)
    g = torch.Generator().manual_seed(3)
    x = torch.randn((BATCH, 3, 16, 16), generator=g)
    label = torch.randint(0, cfg.num_labels, (BATCH,), generator=g)
    return model, "pixel_values", x, label, cfg.num_labels


def tvvit():
    from torchvision.models import VisionTransformer
    model = VisionTransformer(image_size=16, patch_size=4, num_layers=2, num_heads=2,
                              hidden_dim=32, mlp_dim=64, num_classes=5, dropout=0.0,
                              attention_dropout=0.0)
    torch.nn.init.normal_(model.heads.head.weight, std=0.2)  # zero-initialized: logits all 0
    g = torch.Generator().manual_seed(4)
    x = torch.randn((BATCH, 3, 16, 16), generator=g)
    label = torch.randint(0, 5, (BATCH,), generator=g)
    return model, "pixel_values", x, label, 5


MODELS = {"gpt2": gpt2, "bert": bert, "vit": vit, "tvvit": tvvit}


def loss_of(logits, label, classes):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, classes), label.reshape(-1))


def strip_metadata(path):
    """Drops the per-node metadata (stack traces, fx node names, scopes) that makes up most of
    an export's bytes; the graph and its weights are untouched. Checks the model."""
    import onnx
    m = onnx.load(path)
    for n in m.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    onnx.checker.check_model(m)
    onnx.save(m, path)


def make(name, out):
    import onnx
    import onnxruntime as ort
    torch.manual_seed(0)
    model, input_name, x, label, classes = MODELS[name]()
    wrapped = Logits(model).eval()
    paths = {}
    for suffix, optimize in (("", True), ("_noopt", False)):
        path = os.path.join(out, f"{name}{suffix}.onnx")
        torch.onnx.export(wrapped, (x,), path, dynamo=True, opset_version=18, optimize=optimize,
                          input_names=[input_name], output_names=["logits"],
                          external_data=False)
        strip_metadata(path)
        paths[suffix] = path
    if name == "gpt2":
        # A dynamic batch axis (the mask chains then fold only once dtc binds the batch).
        path = os.path.join(out, f"{name}_dyn.onnx")
        torch.onnx.export(wrapped, (x,), path, dynamo=True, opset_version=18, optimize=False,
                          input_names=[input_name], output_names=["logits"],
                          external_data=False,
                          dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=64)}})
        strip_metadata(path)
        paths["_dyn"] = path
    # What the default optimizer's DeduplicateInitializersPass alone does to the plain export.
    import onnx_ir
    from onnx_ir.passes.common import DeduplicateInitializersPass
    merged = onnx_ir.load(paths["_noopt"])
    DeduplicateInitializersPass()(merged)
    paths["_merged"] = os.path.join(out, f"{name}_merged.onnx")
    onnx_ir.save(merged, paths["_merged"])
    strip_metadata(paths["_merged"])
    with torch.no_grad():
        ref = wrapped(x).numpy()
    # 5 full-batch SGD steps; the loss is recorded before each update (what dtc-run logs).
    opt = torch.optim.SGD(wrapped.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_of(wrapped(x), label, classes)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    np.savez(os.path.join(out, f"{name}_data.npz"), **{input_name: x.numpy(),
                                                     "label": label.numpy()})
    np.savez(os.path.join(out, f"{name}_ref.npz"), output=ref,
             losses=np.array(losses, dtype=np.float64))
    report = {"losses": losses}
    for suffix, path in paths.items():
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = sess.run(None, {input_name: x.numpy()})[0]
        report["ort_rel_err" + suffix] = float(np.abs(got - ref).max() / np.abs(ref).max())
        m = onnx.load(path)
        report["initializers" + suffix] = len(m.graph.initializer)
    print(name, json.dumps(report))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--only", default=",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import transformers
    print("torch", torch.__version__, "transformers", transformers.__version__)
    for name in args.only.split(","):
        make(name, args.out)


if __name__ == "__main__":
    main()
