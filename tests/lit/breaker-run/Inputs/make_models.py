#!/usr/bin/env python3
# Writes the models (and inputs) of the lit tests in tests/lit/breaker-run:
# `make_models.py CASE OUT_DIR` creates OUT_DIR/model.onnx and OUT_DIR/in.npz. Deterministic;
# needs the `onnx` and `numpy` Python packages.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save(out, nodes, inputs, outputs, inits, feeds):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, "model.onnx"))
    np.savez(os.path.join(out, "in.npz"), **feeds)


def conv_add_own_input(out):
    # r = Conv0(x); y = Conv2(Conv1(r) + r): Conv1+Add fuse into one FusedConv whose Z operand
    # (r) is also its X operand, and r dies there.
    rng = np.random.default_rng(0)
    c = 16
    w = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), "w%d" % i)
         for i, s in enumerate([(c, c, 3, 3), (c, c, 3, 3), (c, c, 1, 1)])]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["r"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["r", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r"], ["a"]),
             helper.make_node("Conv", ["a", "w2"], ["y"])]
    x = rng.standard_normal((2, c, 16, 16)).astype(np.float32)
    save(out, nodes, [vi("x", ["N", c, 16, 16])], [vi("y", ["N", c, 16, 16])], w, {"x": x})


def relu_chain(out, n):
    names = ["x"] + ["t%d" % i for i in range(n - 1)] + ["y"]
    nodes = [helper.make_node("Relu", [names[i]], [names[i + 1]]) for i in range(n)]
    x = np.array([[-1, 2, -3, 4]], np.float32)
    save(out, nodes, [vi("x", ["N", 4])], [vi("y", ["N", 4])], [], {"x": x})


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if case == "conv_add_own_input":
        conv_add_own_input(out)
    elif case.startswith("relu_chain_"):
        relu_chain(out, int(case[len("relu_chain_"):]))
    else:
        raise SystemExit("unknown case " + case)


if __name__ == "__main__":
    main()
