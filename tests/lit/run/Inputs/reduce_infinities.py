#!/usr/bin/env python3
# ReduceMax/ReduceMin over slices holding infinities, against numpy's max and min: a slice of
# -inf alone (a fully masked attention row) has max -inf, not oneDNN's starting value -FLT_MAX,
# and a slice of +inf alone has min +inf. `reduce_infinities.py make DIR` writes DIR/model.onnx
# and DIR/in.npz; `reduce_infinities.py check DIR` compares DIR/out.npz with numpy exactly.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model():
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("ReduceMax", ["x", "axes"], ["mx"], keepdims=0),
             helper.make_node("ReduceMin", ["x", "axes"], ["mn"], keepdims=0)]
    outs = [helper.make_tensor_value_info(n, F, [5]) for n in ("mx", "mn")]
    graph = helper.make_graph(nodes, "reduce_inf", [helper.make_tensor_value_info("x", F, [5, 4])],
                              outs, [axes])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def inputs():
    inf = np.inf
    return np.array([[-inf, -inf, -inf, -inf],  # max -inf
                     [inf, inf, inf, inf],      # min +inf
                     [-inf, 1.5, -2.0, -inf],
                     [3.0, inf, -inf, 0.5],
                     [-3.4028235e38, -inf, -1e30, -inf]], np.float32)


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "make":
        os.makedirs(d, exist_ok=True)
        onnx.save(model(), os.path.join(d, "model.onnx"))
        np.savez(os.path.join(d, "in.npz"), x=inputs())
        return
    got = np.load(os.path.join(d, "out.npz"))
    x = inputs()
    bad = []
    for name, want in (("mx", x.max(axis=1)), ("mn", x.min(axis=1))):
        if not np.array_equal(got[name], want):
            bad.append("%s: %s, want %s" % (name, got[name].tolist(), want.tolist()))
    print("\n".join(bad) if bad else "reduce infinities ok")


if __name__ == "__main__":
    main()
