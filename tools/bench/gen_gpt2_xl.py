#!/usr/bin/env python3
# Generates a GPT-2-XL-shaped ONNX graph (48 layers, d_model 1600, 25 heads, vocab 50257, context
# 1024, ~1.56 B parameters) for dtc's import benchmark, with every weight as EXTERNAL data in one
# SPARSE file (truncated to its size, never written), so the 6 GB of zeros cost no disk or time.
# The graph mimics a PyTorch opset-14 export: MatMul/Add linears, ReduceMean/Sub/Pow/Sqrt/Div layer
# norms, Erf GELU, Shape->Gather->Unsqueeze->Concat->Reshape head splits, Constant nodes.
#
#     python3 tools/bench/gen_gpt2_xl.py [OUT_DIR=/tmp/dtc-bench] [--layers 48]
#         [--qkv-split split|slice] [--d-model 1600 --heads 25 --context 1024 --vocab 50257]
#         [--fill zeros|random]
# (the 6.6 B-parameter shape of issue 18: --layers 48 --d-model 3328 --heads 32 --context 2048)
# writes OUT_DIR/gpt2_xl.onnx and OUT_DIR/gpt2_xl.weights (sparse). --fill random writes the
# weights instead (normal, std 0.02; layer-norm scales 1; the causal mask lower-triangular), for
# small shapes that are trained (tools/bench/strategy_bench.py).
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

D_MODEL = 1600
HEADS = 25
VOCAB = 50257
CONTEXT = 1024
ALIGN = 4096  # offsets aligned like onnx's own external-data writer does for large tensors


class Builder:
    def __init__(self, data_file, qkv_split="split"):
        self.qkv_split = qkv_split
        self.nodes = []
        self.inits = []
        self.data_file = data_file
        self.offset = 0
        self.counter = 0
        self.params = 0
        self.blobs = []  # (name, offset, dims, dtype) of every external weight

    def fresh(self, hint):
        self.counter += 1
        return f"/{hint}_{self.counter}"

    def weight(self, name, dims, dtype=TensorProto.FLOAT, itemsize=4):
        t = TensorProto()
        t.name = name
        t.dims.extend(dims)
        t.data_type = dtype
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(dims)) * itemsize
        for key, value in (("location", self.data_file), ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key = key
            entry.value = value
        self.blobs.append((name, self.offset, list(dims), dtype))
        self.offset += (length + ALIGN - 1) // ALIGN * ALIGN
        if dtype == TensorProto.FLOAT:
            self.params += int(np.prod(dims))
        self.inits.append(t)
        return name

    def const(self, array, hint="Constant"):
        out = self.fresh(hint)
        self.nodes.append(helper.make_node(
            "Constant", [], [out], name=out + "_node",
            value=helper.make_tensor(out + "_value", helper.np_dtype_to_tensor_dtype(array.dtype)
                                     if hasattr(helper, "np_dtype_to_tensor_dtype") else
                                     onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[array.dtype],
                                     array.shape, array.flatten().tolist())))
        return out

    def op(self, op_type, inputs, hint=None, outputs=1, **attrs):
        outs = [self.fresh(hint or op_type) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=outs[0] + "_node", **attrs))
        return outs[0] if outputs == 1 else outs

    # ---- PyTorch-export idioms -------------------------------------------------------------
    def dim(self, x, index):
        """Shape(x) -> Gather(index) -> Unsqueeze(0): a 1-element int64 tensor."""
        shape = self.op("Shape", [x])
        d = self.op("Gather", [shape, self.const(np.array(index, dtype=np.int64))], axis=0)
        return self.op("Unsqueeze", [d, self.const(np.array([0], dtype=np.int64))])

    def layer_norm(self, x, prefix):
        gamma = self.weight(prefix + ".weight", [D_MODEL])
        beta = self.weight(prefix + ".bias", [D_MODEL])
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = self.op("Sub", [x, mean])
        sq = self.op("Pow", [d, self.const(np.array(2.0, dtype=np.float32))])
        var = self.op("ReduceMean", [sq], axes=[-1], keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.const(np.array(1e-5, np.float32))])])
        y = self.op("Div", [d, std])
        return self.op("Add", [self.op("Mul", [y, gamma]), beta])

    def linear(self, x, prefix, cin, cout):
        w = self.weight(prefix + ".weight", [cin, cout])
        b = self.weight(prefix + ".bias", [cout])
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def split_heads(self, x, perm):
        n, t = self.dim(x, 0), self.dim(x, 1)
        shape = self.op("Concat", [n, t, self.const(np.array([HEADS], np.int64)),
                                   self.const(np.array([D_MODEL // HEADS], np.int64))], axis=0)
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=perm)

    def attention(self, x, prefix, mask):
        qkv = self.linear(x, prefix + ".c_attn", D_MODEL, 3 * D_MODEL)
        if self.qkv_split == "split":
            q, k, v = self.op("Split", [qkv, self.const(np.array([D_MODEL] * 3, np.int64))],
                              outputs=3, axis=2)
        else:  # three Slice nodes, as exports of `qkv[..., i*d:(i+1)*d]` look
            q, k, v = (self.op("Slice", [qkv, self.const(np.array([i * D_MODEL], np.int64)),
                                         self.const(np.array([(i + 1) * D_MODEL], np.int64)),
                                         self.const(np.array([2], np.int64))])
                       for i in range(3))
        q = self.split_heads(q, [0, 2, 1, 3])
        k = self.split_heads(k, [0, 2, 3, 1])
        v = self.split_heads(v, [0, 2, 1, 3])
        att = self.op("MatMul", [q, k])
        att = self.op("Div", [att, self.const(np.array(np.sqrt(D_MODEL // HEADS), np.float32))])
        # causal mask: bias[:, :, :T, :T] of the [1,1,1024,1024] bool buffer
        t = self.dim(q, 2)
        zeros = self.const(np.array([0, 0], np.int64))
        ends = self.op("Concat", [t, t], axis=0)
        axes = self.const(np.array([2, 3], np.int64))
        m = self.op("Slice", [mask, zeros, ends, axes])
        att = self.op("Where", [m, att, self.const(np.array(-3.4028234663852886e38, np.float32))])
        att = self.op("Softmax", [att], axis=-1)
        y = self.op("Transpose", [self.op("MatMul", [att, v])], perm=[0, 2, 1, 3])
        shape = self.op("Concat", [self.dim(x, 0), self.dim(x, 1),
                                   self.const(np.array([D_MODEL], np.int64))], axis=0)
        y = self.op("Reshape", [y, shape])
        return self.linear(y, prefix + ".c_proj", D_MODEL, D_MODEL)

    def gelu(self, x):
        e = self.op("Erf", [self.op("Div", [x, self.const(np.array(1.4142135, np.float32))])])
        e = self.op("Add", [e, self.const(np.array(1.0, np.float32))])
        return self.op("Mul", [self.op("Mul", [x, e]), self.const(np.array(0.5, np.float32))])

    def block(self, x, i, mask):
        p = f"transformer.h.{i}"
        x = self.op("Add", [x, self.attention(self.layer_norm(x, p + ".ln_1"), p + ".attn", mask)])
        h = self.linear(self.layer_norm(x, p + ".ln_2"), p + ".mlp.c_fc", D_MODEL, 4 * D_MODEL)
        h = self.linear(self.gelu(h), p + ".mlp.c_proj", 4 * D_MODEL, D_MODEL)
        return self.op("Add", [x, h])


def build(layers, data_file, qkv_split="split"):
    b = Builder(data_file, qkv_split)
    wte = b.weight("transformer.wte.weight", [VOCAB, D_MODEL])  # VOCAB: --vocab
    wpe = b.weight("transformer.wpe.weight", [CONTEXT, D_MODEL])
    mask = b.weight("transformer.h.attn.bias", [1, 1, CONTEXT, CONTEXT], TensorProto.BOOL, 1)
    # positions = Range(0, T) -> Unsqueeze(0)
    t = b.op("Gather", [b.op("Shape", ["input_ids"]), b.const(np.array(1, np.int64))], axis=0)
    pos = b.op("Range", [b.const(np.array(0, np.int64)), t, b.const(np.array(1, np.int64))])
    pos = b.op("Unsqueeze", [pos, b.const(np.array([0], np.int64))])
    x = b.op("Add", [b.op("Gather", [wte, "input_ids"], axis=0),
                     b.op("Gather", [wpe, pos], axis=0)])
    for i in range(layers):
        x = b.block(x, i, mask)
    x = b.layer_norm(x, "transformer.ln_f")
    # tied LM head: logits = x @ wte^T
    head = b.op("Transpose", [wte], perm=[1, 0])
    b.nodes.append(helper.make_node("MatMul", [x, head], ["logits"], name="/lm_head/MatMul"))
    graph = helper.make_graph(
        b.nodes, "gpt2_xl",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", "T"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", "T", VOCAB])],
        initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                              producer_name="dtc gen_gpt2_xl.py")
    model.ir_version = 8
    return model, b.offset, b.params, b.blobs


def fill_random(path, blobs, seed=0):
    """Writes every weight into the (sparse) file: normal(0, 0.02) matrices, layer-norm scales
    1 and biases 0 (GPT-2's initialization), the causal mask lower-triangular."""
    rng = np.random.default_rng(seed)
    with open(path, "r+b") as f:
        for name, offset, dims, dtype in blobs:
            if dtype == TensorProto.BOOL:
                a = np.tril(np.ones(dims[-2:], np.bool_)).reshape(dims)
            elif name.endswith(".bias"):
                a = np.zeros(dims, np.float32)
            elif ".ln_" in name or name.startswith("transformer.ln_f"):
                a = np.ones(dims, np.float32)
            else:
                a = (rng.standard_normal(dims) * 0.02).astype(np.float32)
            f.seek(offset)
            f.write(a.tobytes())


def main():
    global D_MODEL, HEADS, CONTEXT, VOCAB
    ap = argparse.ArgumentParser(description="generate a GPT-2-XL-shaped ONNX graph")
    ap.add_argument("out_dir", nargs="?", default="/tmp/dtc-bench")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--name", default="gpt2_xl")
    ap.add_argument("--qkv-split", choices=["split", "slice"], default="split",
                    help="cut the fused QKV projection with one Split (default) or three Slices")
    ap.add_argument("--d-model", type=int, default=D_MODEL)
    ap.add_argument("--heads", type=int, default=HEADS)
    ap.add_argument("--context", type=int, default=CONTEXT)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--fill", choices=["zeros", "random"], default="zeros",
                    help="zeros: a sparse weights file (nothing written); random: weights "
                         "written (small shapes only)")
    args = ap.parse_args()
    if args.d_model % args.heads:
        sys.exit(f"error: --d-model {args.d_model} does not divide into {args.heads} heads")
    D_MODEL, HEADS, CONTEXT, VOCAB = args.d_model, args.heads, args.context, args.vocab
    os.makedirs(args.out_dir, exist_ok=True)
    data_file = args.name + ".weights"
    model, total, params, blobs = build(args.layers, data_file, args.qkv_split)
    model_path = os.path.join(args.out_dir, args.name + ".onnx")
    with open(model_path, "wb") as f:
        f.write(model.SerializeToString())
    # Sparse weights file: set its size, write nothing.
    with open(os.path.join(args.out_dir, data_file), "wb") as f:
        f.truncate(total)
    if args.fill == "random":
        fill_random(os.path.join(args.out_dir, data_file), blobs)
    onnx.checker.check_model(model_path)  # by path: external data resolved beside the model
    print(f"{model_path}: {len(model.graph.node)} nodes, {len(model.graph.initializer)} "
          f"initializers, {params / 1e9:.3f} B parameters, {total / 2**30:.2f} GiB external "
          f"data ({'sparse' if args.fill == 'zeros' else 'written'}) in {data_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
