#!/usr/bin/env python3
# NaN semantics against the ONNX reference (onnx.reference.ReferenceEvaluator, numpy): a small
# CNN (Conv -> Relu, fused by dtc-compile into FusedConv with a relu; MaxPool; Flatten; Softmax)
# and Relu, Exp, MaxPool, Softmax applied to the input directly, run by dtc-run --infer on inputs
# holding NaN and +-inf. MaxPool follows PyTorch (torch.nn.functional.max_pool2d: a window
# holding NaN is NaN, numpy's max), where the ONNX reference and onnxruntime skip NaN; the check
# runs the reference with that MaxPool. `nan_semantics.py make DIR` writes DIR/model.onnx and
# DIR/in.npz; `nan_semantics.py check DIR` compares DIR/out.npz with the reference: NaN exactly
# where the reference has NaN, other values within 1e-5 (issue 13, finding 13).
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

F = TensorProto.FLOAT


class MaxPool(OpRun):
    """MaxPool without pads or dilations, as torch.nn.functional.max_pool2d: NaN propagates."""
    op_domain = ""

    def _run(self, x, kernel_shape=None, strides=None, **unused):
        kh, kw = kernel_shape
        sh, sw = strides or (1, 1)
        win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
        return (win[:, :, ::sh, ::sw].max(axis=(-2, -1)).astype(x.dtype),)


def model():
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.array([0.1, -0.2, 0.3], np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["cr"], name="conv_relu"),
        helper.make_node("MaxPool", ["cr"], ["pool"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flat"),
        helper.make_node("Softmax", ["flat"], ["prob"], name="softmax", axis=1),
        helper.make_node("Relu", ["x"], ["relu"], name="relu"),
        helper.make_node("Exp", ["x"], ["exp"], name="exp"),
        helper.make_node("MaxPool", ["x"], ["xpool"], name="xpool", kernel_shape=[2, 2],
                         strides=[1, 1]),
        helper.make_node("Reshape", ["x", "rows"], ["xrows"], name="rows"),
        helper.make_node("Softmax", ["xrows"], ["xsoft"], name="xsoftmax", axis=1),
    ]
    rows = numpy_helper.from_array(np.array([16, 9], np.int64), "rows")
    outs = [helper.make_tensor_value_info(n, F, None)
            for n in ("prob", "relu", "exp", "xpool", "xsoft")]
    graph = helper.make_graph(nodes, "nan", [helper.make_tensor_value_info("x", F, [2, 2, 6, 6])],
                              outs, [w, b, rows])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def inputs():
    x = np.linspace(-3, 3, 144, dtype=np.float32).reshape(2, 2, 6, 6)
    x[0, 0, 1, 1] = np.nan  # spoils sample 0's conv windows around it, and its softmax row
    x[0, 1, 4, 5] = np.inf
    x[0, 1, 5, 0] = -np.inf
    # Sample 1 stays finite: its outputs must stay finite and correct.
    return x


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "make":
        os.makedirs(d, exist_ok=True)
        onnx.save(model(), os.path.join(d, "model.onnx"))
        np.savez(os.path.join(d, "in.npz"), x=inputs())
        return
    with np.errstate(invalid="ignore"):
        want = ReferenceEvaluator(model(), new_ops=[MaxPool]).run(None, {"x": inputs()})
    got = np.load(os.path.join(d, "out.npz"))
    bad = []
    with np.errstate(invalid="ignore"):
        for name, w in zip(("prob", "relu", "exp", "xpool", "xsoft"), want):
            g = got[name]
            if g.shape != w.shape:
                bad.append("%s: shape %s, want %s" % (name, g.shape, w.shape))
                continue
            if not np.any(np.isnan(w)):
                bad.append("%s: the reference has no NaN (test input too weak)" % name)
            if not (np.isnan(g) == np.isnan(w)).all():
                bad.append("%s: NaN at %s, want at %s" % (
                    name, np.argwhere(np.isnan(g)).tolist(), np.argwhere(np.isnan(w)).tolist()))
                continue
            ok = ~np.isnan(w)
            if not np.allclose(g[ok], w[ok], rtol=1e-5, atol=1e-5):
                bad.append("%s: values differ from the reference" % name)
    print("\n".join(bad) if bad else "nan semantics ok")


if __name__ == "__main__":
    main()
