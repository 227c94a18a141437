#!/usr/bin/env python3
# Writes one bad (or external-data) ONNX input for the lit tests in tests/lit/errors and
# tests/lit/import: `make_bad_inputs.py CASE OUT_DIR` creates OUT_DIR/model.onnx (plus any data
# files next to it). Deterministic; needs the `onnx` Python package (any version >= 1.12).
import os
import random
import sys

import onnx
from onnx import TensorProto, helper


def small_model(initializers=(), inputs=None, nodes=None, outputs=None, opset=13):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = nodes if nodes is not None else [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", inputs if inputs is not None else [x],
                              outputs if outputs is not None else [y], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def weight(name="w", dims=(2, 3)):
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor(name, TensorProto.FLOAT, list(dims), [float(i) for i in range(n)])


def external_weight(location, offset=None, length=None, dims=(2, 3)):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = t.external_data.add()
        e.key = k
        e.value = v
    return t


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    model_path = os.path.join(out, "model.onnx")
    floats = bytes(range(24))  # 6 floats' worth of bytes
    if case == "empty":
        write(model_path, b"")
    elif case == "random":
        rng = random.Random(1234)
        write(model_path, bytes([0xFF]) + bytes(rng.randrange(256) for _ in range(2047)))
    elif case == "truncated":
        data = small_model([weight(dims=(2, 3)), weight("big", (32, 32))]).SerializeToString()
        write(model_path, data[: len(data) * 6 // 10])
    elif case == "prototxt":
        write(model_path, str(small_model([weight()])).encode())
    elif case == "lfs":
        write(model_path, b"version https://git-lfs.github.com/spec/v1\n"
              b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
              b"size 12345\n")
    elif case == "overflow_init":
        t = TensorProto()
        t.name = "w"
        t.data_type = TensorProto.FLOAT
        t.dims.extend([2**40, 2**40])
        write(model_path, small_model([t]).SerializeToString())
    elif case == "if_node":
        then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
        else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])])
        cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                                else_branch=else_g)
        write(model_path, small_model(inputs=[cond, x], nodes=[node]).SerializeToString())
    elif case == "ext_ok":
        # w.bin: 8 bytes of padding, then the 6 floats 0.5, 1.5, ..., 5.5.
        import struct
        write(os.path.join(out, "w.bin"),
              b"\0" * 8 + struct.pack("<6f", *[i + 0.5 for i in range(6)]))
        write(model_path, small_model([external_weight("w.bin", 8, 24)]).SerializeToString())
    elif case == "ext_dotdot":
        write(os.path.join(os.path.dirname(os.path.abspath(out)), "outside.bin"), floats)
        write(model_path, small_model([external_weight("../outside.bin")]).SerializeToString())
    elif case == "ext_symlink":
        target = os.path.join(os.path.dirname(os.path.abspath(out)), "outside.bin")
        write(target, floats)
        link = os.path.join(out, "link.bin")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)
        write(model_path, small_model([external_weight("link.bin")]).SerializeToString())
    elif case == "ext_abs":
        target = os.path.join(os.path.abspath(out), "w.bin")
        write(target, floats)
        write(model_path, small_model([external_weight(target)]).SerializeToString())
    elif case == "ext_missing":
        write(model_path, small_model([external_weight("missing.bin")]).SerializeToString())
    elif case == "ext_past_end":
        write(os.path.join(out, "w.bin"), floats)
        write(model_path, small_model([external_weight("w.bin", offset=16)]).SerializeToString())
    else:
        sys.exit("unknown case " + case)


if __name__ == "__main__":
    main()
