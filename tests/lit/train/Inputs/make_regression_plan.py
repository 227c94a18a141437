"""Writes a hand-made training plan and its source model for the dtc-run training tests.

Usage: make_regression_plan.py PLAN_PB2_DIR OUT_DIR
PLAN_PB2_DIR holds plan_pb2.py (protoc --python_out of compiler/plan/plan.proto). Writes
OUT_DIR/model.onnx (y = ReduceSum(x * w, axis 1), w an initializer), OUT_DIR/plan.dtc (linear
regression, MSE loss, SGD with momentum 0.9 written with ONNX ops, batch 4), and
OUT_DIR/train.npz, OUT_DIR/val.npz (label = x . [1, 2, -1]). Mirrors
tests/unit/runtime/TrainingTestUtil.cpp.
"""
import ctypes
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, sys.argv[1])
import plan_pb2 as P  # noqa: E402

out = sys.argv[2]
B, F = 4, 3


class XXH128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def xxh3_128_hex(data):
    """XXH3-128 as the plan records it (xxHash's canonical order: high 64 bits first), from the
    libxxhash that dtc links (libxxhash-dev depends on its runtime, libxxhash0)."""
    fn = ctypes.CDLL("libxxhash.so.0").XXH3_128bits
    fn.restype = XXH128
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    h = fn(data, len(data))
    return "%016x%016x" % (h.high64, h.low64)


w0 = np.array([0.5, -0.25, 1.0], np.float32)
graph = helper.make_graph(
    [helper.make_node("Mul", ["x", "w"], ["xw"]),
     helper.make_node("ReduceSum", ["xw", "ax"], ["y"], keepdims=0)],
    "regression",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, F])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B])],
    [onnx.numpy_helper.from_array(w0, "w"), onnx.numpy_helper.from_array(np.array([1], np.int64), "ax")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
model_bytes = model.SerializeToString()
with open(os.path.join(out, "model.onnx"), "wb") as f:
    f.write(model_bytes)

p = P.Plan()
p.format_version = 3
p.producer = "hand-made test plan"
p.mode = P.MODE_TRAINING
p.world_size = 1
p.model.path = "model.onnx"
p.model.checksum = xxh3_128_hex(model_bytes)
p.model.checksum_algorithm = P.CHECKSUM_XXH3_128
p.model.size_bytes = len(model_bytes)
hp = p.hyperparameters
hp.batch_size, hp.loss, hp.optimizer, hp.lr, hp.momentum = B, "mse", "sgd", 0.05, 0.9
hp.lr_schedule, hp.grad_accum_steps = "constant", 1
ri = p.ranks.add()
ri.rank = 0
ri.device.type = P.DEVICE_CPU
r = p.programs.add()
r.ranks.append(0)
r.alignment = 64
DT = {np.float32: 1, np.int64: 7}


def buf(name, kind, dtype, shape, source="", data=None):
    b = r.buffers.add()
    b.name, b.kind, b.dtype = name, kind, DT[dtype]
    b.shape.extend(shape)
    b.size_bytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    b.offset = r.arena_bytes
    r.arena_bytes += (b.size_bytes + 63) // 64 * 64
    r.no_reuse_bytes = r.arena_bytes
    if source:
        b.source = source
    if data is not None:
        b.data = np.asarray(data, dtype).tobytes()
    return len(r.buffers) - 1


def kernel(op, ins, outs, keepdims=None):
    k = r.instructions.add().kernel
    k.op, k.node = op, "%s_%d" % (op, len(r.instructions))
    k.inputs.extend(ins)
    k.outputs.extend(outs)
    if keepdims is not None:
        a = k.attributes.add()
        a.name, a.i = "keepdims", keepdims


def copy(src, dst):
    c = r.instructions.add().copy
    c.src, c.dst = src, dst


I, O, A, C = P.BUFFER_INPUT, P.BUFFER_OUTPUT, P.BUFFER_ACTIVATION, P.BUFFER_CONSTANT
f4, i8 = np.float32, np.int64
x = buf("x", I, f4, [B, F])
label = buf("label", I, f4, [B])
lr = buf("dtc::lr", I, f4, [])
step = buf("dtc::step", I, i8, [])
rng = buf("dtc::rng", I, i8, [3])
w = buf("w", P.BUFFER_PARAMETER, f4, [F], "w")
g = buf("w.grad", P.BUFFER_GRADIENT, f4, [F], "w")
m = buf("w.momentum", P.BUFFER_OPTIMIZER_STATE, f4, [F])
ax1 = buf("axes1", C, i8, [1], data=[1])
ax0 = buf("axes0", C, i8, [1], data=[0])
c2b = buf("two_over_b", C, f4, [], data=2.0 / B)
mom = buf("momentum", C, f4, [], data=0.9)
xw = buf("xw", A, f4, [B, F])
pred = buf("pred", O, f4, [B])
diff = buf("diff", A, f4, [B])
sq = buf("sq", A, f4, [B])
loss = buf("loss", O, f4, [])
scaled = buf("scaled", A, f4, [B])
scaled2 = buf("scaled2d", A, f4, [B, 1])
gx = buf("gx", A, f4, [B, F])
m_scaled = buf("m_scaled", A, f4, [F])
m_new = buf("m_new", A, f4, [F])
upd = buf("update", A, f4, [F])
w_new = buf("w_new", A, f4, [F])
kernel("Mul", [x, w], [xw])
kernel("ReduceSum", [xw, ax1], [pred], 0)
kernel("Sub", [pred, label], [diff])
kernel("Mul", [diff, diff], [sq])
kernel("ReduceMean", [sq, ax0], [loss], 0)
kernel("Mul", [diff, c2b], [scaled])
copy(scaled, scaled2)
kernel("Mul", [x, scaled2], [gx])
kernel("ReduceSum", [gx, ax0], [g], 0)
optimizer_begin = len(r.instructions)
kernel("Mul", [m, mom], [m_scaled])
kernel("Add", [m_scaled, g], [m_new])
copy(m_new, m)
kernel("Mul", [m_new, lr], [upd])
kernel("Sub", [w, upd], [w_new])
copy(w_new, w)
for name, b in [("x", x), ("label", label), ("dtc::lr", lr), ("dtc::step", step), ("dtc::rng", rng)]:
    r.inputs.add(name=name, buffer=b)
for name, b in [("pred", pred), ("loss", loss)]:
    r.outputs.add(name=name, buffer=b)
t = r.training
t.loss_output, t.prediction_output, t.label_input, t.ignore_index = "loss", "pred", "label", -100
t.optimizer_begin = optimizer_begin
t.lr_input, t.step_input, t.rng_input = "dtc::lr", "dtc::step", "dtc::rng"
tp = t.parameters.add(name="w", buffer=w, gradient=g)
tp.state.append(m)
with open(os.path.join(out, "plan.dtc"), "wb") as f:
    f.write(p.SerializeToString())

rs = np.random.RandomState(0)
for name, n in [("train", 20), ("val", 8)]:
    xs = rs.uniform(-1, 1, (n, F)).astype(np.float32)
    np.savez(os.path.join(out, name + ".npz"), x=xs, label=(xs @ np.array([1, 2, -1], np.float32)))
