#!/usr/bin/python3
# Exports dtc's small reference models to ONNX with PyTorch (deterministic: torch.manual_seed(0)).
# Each model is re-created from this file; the .onnx files beside it are its output.
#
# Re-run (Debian's PyTorch 1.13 lives under /usr/bin/python3, not the `python3` on PATH):
#     /usr/bin/python3 models/export_models.py [--out models] [--only mlp,cnn,...]
#
# Models (every input and output has a dynamic batch axis named "N"):
#   mlp         Linear 784->128, ReLU, Linear 128->64, ReLU, Linear 64->10.
#               input "input" f32[N,784] -> "logits" f32[N,10]; eval export, opset 13.
#   mlp_digits  Linear 64->32, ReLU, Linear 32->10 (8x8 handwritten digits).
#               input "input" f32[N,64] -> "logits" f32[N,10]; eval export, opset 13.
#   cnn         Conv(3->16,3x3,pad 1)-BN-ReLU-MaxPool(2)-Conv(16->32,3x3,pad 1)-BN-ReLU-
#               GlobalAvgPool-Flatten-Linear(32->10).
#               input "input" f32[N,3,32,32] -> "logits" f32[N,10]; opset 13.
#               cnn.onnx: eval export (BN folded into Conv); cnn_train.onnx: training export
#               (BatchNormalization kept, parameter names kept, no constant folding).
#   resnet      stem Conv(3->16,3x3)-BN-ReLU, BasicBlock(16->16), BasicBlock(16->32, stride 2,
#               1x1 strided Conv+BN projection), AdaptiveAvgPool(1), Flatten, Linear(32->10).
#               input "input" f32[N,3,32,32] -> "logits" f32[N,10]; eval and training, opset 13.
#   unet        2-level UNet: enc1 (3->16), pool, enc2 (16->32), pool, bottleneck (32->64),
#               up by ConvTranspose2d(64->32, 2x2, stride 2), cat with enc2, dec2 (64->32),
#               up by nn.Upsample(x2, bilinear, align_corners=False) (-> Resize), cat with enc1,
#               dec1 (48->16), 1x1 Conv(16->3). Every "enc/dec" is two Conv3x3-BN-ReLU.
#               input "input" f32[N,3,32,32] -> "logits" f32[N,3,32,32]; eval and training,
#               opset 13.
#   gpt         GPT-style decoder: token embedding (vocab 64, d_model 32) + learned position
#               embedding (16), 2 pre-LN blocks of causal self-attention (2 heads) and MLP
#               (32->128, GELU, 128->32), final LayerNorm, LM head (32->64, no bias).
#               input "tokens" i64[N,16] -> "logits" f32[N,16,64]; opset 14 (LayerNorm exports
#               as ReduceMean/Sub/Pow/Sqrt/Div, GELU as Erf). gpt.onnx: eval export (constant
#               folding pre-transposes the linear weights and de-duplicates identical ones, e.g.
#               ln2.weight becomes ln1.weight); gpt_train.onnx: training export (names kept,
#               weights reach MatMul through Transpose nodes; the causal-mask buffers
#               blocks.*.attn.mask are initializers too, only feeding Equal -> Where).
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def conv_bn_relu(cin, cout, stride=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    )


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(self.gap(x), 1))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv_bn_relu(3, 16)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(conv_bn_relu(cin, cout), conv_bn_relu(cout, cout))


class UNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.enc1 = DoubleConv(3, 16)
        self.enc2 = DoubleConv(16, 32)
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = DoubleConv(32, 64)
        self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
        self.dec2 = DoubleConv(64, 32)
        self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec1 = DoubleConv(32 + 16, 16)
        self.head = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)                     # [N,16,32,32]
        e2 = self.enc2(self.pool(e1))         # [N,32,16,16]
        b = self.bottleneck(self.pool(e2))    # [N,64,8,8]
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))   # [N,32,16,16]
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))  # [N,16,32,32]
        return self.head(d1)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, heads, context):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        mask = torch.tril(torch.ones(context, context)).view(1, 1, context, context)
        self.register_buffer("mask", mask)

    def forward(self, x):
        n, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        hd = c // self.heads
        q = q.view(n, t, self.heads, hd).transpose(1, 2)
        k = k.view(n, t, self.heads, hd).transpose(1, 2)
        v = v.view(n, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(n, t, c)
        return self.proj(y)


class GptBlock(nn.Module):
    def __init__(self, d_model, heads, context):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, context)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    def __init__(self, vocab=64, context=16, d_model=32, heads=2, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.Sequential(*[GptBlock(d_model, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        positions = torch.arange(t, dtype=torch.long, device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        return self.head(self.ln_f(self.blocks(x)))


class TiedGpt(Gpt):
    """The GPT with its output projection tied to the token embedding (GPT-2's weight tying)."""

    def __init__(self):
        super().__init__()
        self.head.weight = self.tok.weight


# name -> (constructor, example input, input name, opset, export training variant too)
def model_specs():
    return {
        "mlp": (lambda: Mlp([784, 128, 64, 10]), lambda: torch.randn(2, 784), "input", 13, False),
        "mlp_digits": (lambda: Mlp([64, 32, 10]), lambda: torch.randn(2, 64), "input", 13, False),
        "cnn": (Cnn, lambda: torch.randn(2, 3, 32, 32), "input", 13, True),
        "resnet": (ResNet, lambda: torch.randn(2, 3, 32, 32), "input", 13, True),
        "unet": (UNet, lambda: torch.randn(2, 3, 32, 32), "input", 13, True),
        "gpt": (Gpt, lambda: torch.randint(0, 64, (2, 16), dtype=torch.long), "tokens", 14, True),
        # The seed's tensor-parallel example: a hidden layer of 10 nodes (split 5/5 at tp=2).
        "mlp_seed": (lambda: Mlp([64, 10, 10]), lambda: torch.randn(2, 64), "input", 13, False),
        "gpt_tied": (TiedGpt, lambda: torch.randint(0, 64, (2, 16), dtype=torch.long), "tokens", 14,
                     True),
    }


def export(name, out_dir, training):
    ctor, make_input, input_name, opset, _ = model_specs()[name]
    # Seeding per model keeps every file reproducible whichever subset is exported.
    torch.manual_seed(0)
    model = ctor()
    example = make_input()
    path = os.path.join(out_dir, name + ("_train" if training else "") + ".onnx")
    kwargs = dict(
        input_names=[input_name],
        output_names=["logits"],
        dynamic_axes={input_name: {0: "N"}, "logits": {0: "N"}},
        opset_version=opset,
    )
    if training:
        model.train()
        kwargs.update(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    else:
        model.eval()
        kwargs.update(training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True)
    with torch.no_grad():
        torch.onnx.export(model, (example,), path, **kwargs)
    params = sum(p.numel() for p in model.parameters())
    return path, params


def main():
    ap = argparse.ArgumentParser(description="export dtc's reference models to ONNX")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = ap.parse_args()
    specs = model_specs()
    names = [n for n in args.only.split(",") if n] or list(specs)
    for n in names:
        if n not in specs:
            sys.exit(f"unknown model '{n}' (known: {', '.join(specs)})")
    os.makedirs(args.out, exist_ok=True)
    import onnx

    for n in names:
        variants = [False, True] if specs[n][4] else [False]
        for training in variants:
            path, params = export(n, args.out, training)
            onnx.checker.check_model(onnx.load(path))
            print(f"{path}: {params} parameters, {os.path.getsize(path)} bytes, checker ok")


if __name__ == "__main__":
    main()
