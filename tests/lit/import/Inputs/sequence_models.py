"""Writes models that use the sequence operators the way exporters do (torch.split / chunk /
unbind / stack), plus inputs and onnxruntime's outputs for them, into the folder argv[1]:
  seq<opset>.onnx, seq_in.npz, seq<opset>_ref.npz; and seq_dynamic.onnx (a SplitToSequence
whose axis length is not static), seq_badpos.onnx (a position that is not a constant)."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

out = sys.argv[1]
I64 = TensorProto.INT64


def const(name, values, dims=None):
    values = np.asarray(values, np.int64)
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name + "_t", I64, list(values.shape) if dims is None else dims, values.flatten().tolist()))


def model(opset):
    nodes = [
        const("sizes", [2, 4]), const("zero", 0, []), const("one", 1, []), const("m1", -1, []),
        # torch.split(x, [2, 4], dim=1)
        helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
        helper.make_node("SequenceAt", ["parts", "zero"], ["p0"]),
        helper.make_node("SequenceAt", ["parts", "m1"], ["p1"]),
        helper.make_node("SequenceLength", ["parts"], ["n"]),
        # torch.unbind(x, dim=0) -> rows, then torch.stack(rows[::-1], dim=1)
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
        helper.make_node("SequenceAt", ["rows", "one"], ["r1"]),
        helper.make_node("SequenceAt", ["rows", "zero"], ["r0"]),
        helper.make_node("SequenceConstruct", ["r1", "r0"], ["pair"]),
        helper.make_node("SequenceInsert", ["pair", "r1"], ["triple"]),
        helper.make_node("SequenceErase", ["triple", "zero"], ["pair2"]),
        helper.make_node("ConcatFromSequence", ["pair2"], ["stacked"], axis=1, new_axis=1),
        # torch.split(x, 4, dim=-1) with a scalar split (last chunk smaller), torch.cat
        const("four", 4, []),
        helper.make_node("SplitToSequence", ["x", "four"], ["chunks"], axis=-1),
        helper.make_node("ConcatFromSequence", ["chunks"], ["cat"], axis=-1),
        helper.make_node("Mul", ["p0", "p0"], ["sq"]),
    ]
    g = helper.make_graph(
        nodes, "seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("sq", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("p1", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("n", I64, None),
         helper.make_tensor_value_info("stacked", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("cat", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


x = np.arange(12, dtype=np.float32).reshape(2, 6) - 3.5
np.savez(f"{out}/seq_in.npz", x=x)
for opset in (12, 17):
    m = model(opset)
    onnx.save(m, f"{out}/seq{opset}.onnx")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    np.savez(f"{out}/seq{opset}_ref.npz", **dict(zip(names, sess.run(None, {"x": x}))))

# A SplitToSequence whose axis length is only known at run time.
g = helper.make_graph(
    [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1, name="split_rows"),
     const("zero", 0, []), helper.make_node("SequenceAt", ["s", "zero"], ["y"])],
    "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "W"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
          f"{out}/seq_dynamic.onnx")
# A position computed at run time.
g = helper.make_graph(
    [const("sizes", [3, 3]), helper.make_node("SplitToSequence", ["x", "sizes"], ["s"], axis=1),
     helper.make_node("SequenceAt", ["s", "i"], ["y"], name="pick")],
    "badpos", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
               helper.make_tensor_value_info("i", I64, [])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
          f"{out}/seq_badpos.onnx")
