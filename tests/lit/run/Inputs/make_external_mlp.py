"""Writes an MLP (x[N,4] -> Gemm -> Relu -> Gemm -> y[N,3]) whose weights live in an external
data file next to it, and matching inputs: model.onnx + weights.bin + in.npz in OUT_DIR.
Usage: make_external_mlp.py OUT_DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rs = np.random.RandomState(0)
inits = [numpy_helper.from_array(rs.randn(*s).astype(np.float32), n)
         for n, s in [("w1", (8, 4)), ("b1", (8,)), ("w2", (3, 8)), ("b2", (3,))]]
graph = helper.make_graph(
    [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
     helper.make_node("Relu", ["h"], ["r"]),
     helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
    "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.save_model(model, os.path.join(out, "model.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
np.savez(os.path.join(out, "in.npz"), x=rs.randn(2, 4).astype(np.float32))
