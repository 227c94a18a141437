"""Conv, MaxPool and AveragePool with auto_pad (SAME_UPPER, SAME_LOWER with strides, VALID): the
model, an input and onnxruntime's output (make), or dtc's output compared with it (check).

Usage: auto_pad.py make DIR | auto_pad.py check DIR OUT_NPZ
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

d = sys.argv[2]
if sys.argv[1] == "make":
    r = np.random.default_rng(0)
    ws = [nh.from_array(r.standard_normal(s).astype(np.float32), n)
          for n, s in (("w1", (4, 2, 3, 3)), ("w2", (4, 4, 2, 2)), ("w3", (3, 4, 3, 2)))]
    nodes = [
        h.make_node("Conv", ["x", "w1"], ["a"], auto_pad="SAME_UPPER", strides=[2, 2]),
        h.make_node("Relu", ["a"], ["ar"]),
        h.make_node("Conv", ["ar", "w2"], ["b"], auto_pad="SAME_LOWER", strides=[1, 2]),
        h.make_node("MaxPool", ["b"], ["c"], kernel_shape=[3, 2], auto_pad="SAME_UPPER",
                    strides=[2, 1]),
        h.make_node("AveragePool", ["c"], ["e0"], kernel_shape=[2, 3], auto_pad="SAME_LOWER"),
        h.make_node("Conv", ["e0", "w3"], ["e"], auto_pad="VALID"),
        h.make_node("GlobalAveragePool", ["e"], ["f"]),
        h.make_node("Flatten", ["f"], ["y"]),
    ]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 2, 11, 9])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])], ws)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(d, "auto_pad.onnx"))
    x = r.standard_normal((2, 2, 11, 9)).astype(np.float32)
    np.savez(os.path.join(d, "in.npz"), x=x)
    np.savez(os.path.join(d, "train.npz"), x=r.standard_normal((8, 2, 11, 9)).astype(np.float32),
             label=r.integers(0, 3, 8).astype(np.int64))
    import onnxruntime as ort
    ref = ort.InferenceSession(os.path.join(d, "auto_pad.onnx")).run(None, {"x": x})[0]
    np.save(os.path.join(d, "ref.npy"), ref)
else:
    out = np.load(sys.argv[3])["y"]
    ref = np.load(os.path.join(d, "ref.npy"))
    err = float(np.abs(out - ref).max() / np.abs(ref).max())
    print(f"relative difference to onnxruntime {'below' if err < 1e-5 else 'ABOVE'} 1e-5 ({err:.2e})")
