#!/usr/bin/env python3
# Writes one hostile or edge-case ONNX model for the lit tests in tests/lit/breaker:
# `make_hostile.py CASE OUT_DIR` creates OUT_DIR/model.onnx (plus data files next to it).
# Deterministic; needs the `onnx` Python package (any version >= 1.12).
import os
import sys

import onnx
from onnx import TensorProto, helper

F = TensorProto.FLOAT
I64_MAX = 2**63 - 1


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def untyped(name):
    return onnx.ValueInfoProto(name=name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def weight(*dims):
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor("w", F, list(dims), [0.0] * n)


def one_op(op, attrs, inits=(), x_shape=(1, 3, 8, 8), extra_inputs=(), opset=13):
    node = helper.make_node(op, ["x"] + list(extra_inputs), ["y"], name="n", **attrs)
    return model([node], [vi("x", list(x_shape))], [untyped("y")], inits, opset)


def scales(*vals):
    return helper.make_tensor("s", F, [len(vals)], list(vals))


def relu_chain(n, reverse):
    names = ["x"] + ["t%d" % i for i in range(n - 1)] + ["y"]
    nodes = [helper.make_node("Relu", [names[i]], [names[i + 1]], name="r%d" % i)
             for i in range(n)]
    if reverse:
        nodes.reverse()
    return model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])


def external(offset, length):
    t = TensorProto()
    t.name = "w"
    t.data_type = F
    t.dims.extend([3])
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", offset), ("length", length)):
        e = t.external_data.add()
        e.key = key
        e.value = str(value)
    add = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    return model([add], [vi("x", [3])], [vi("y", [3])], [t])


CASES = {
    # Attribute values near INT64_MAX in window arithmetic (signed overflow before the fix).
    "conv_huge_dilation": lambda: one_op("Conv", {"dilations": [2**62, 2**62]}, [weight(4, 3, 3, 3)],
                                         extra_inputs=["w"]),
    "conv_huge_pads": lambda: one_op("Conv", {"pads": [2**62] * 4}, [weight(4, 3, 3, 3)],
                                     extra_inputs=["w"]),
    "conv_huge_group": lambda: one_op("Conv", {"group": I64_MAX}, [weight(4, 3, 3, 3)],
                                      extra_inputs=["w"]),
    "conv_same_huge_stride": lambda: one_op(
        "Conv", {"auto_pad": "SAME_LOWER", "strides": [I64_MAX] * 2, "dilations": [I64_MAX] * 2},
        [weight(4, 3, 3, 3)], extra_inputs=["w"]),
    "maxpool_ceil_huge_stride": lambda: one_op(
        "MaxPool", {"kernel_shape": [2, 2], "strides": [I64_MAX] * 2, "ceil_mode": 1}),
    "avgpool_huge_kernel_pads": lambda: one_op(
        "AveragePool", {"kernel_shape": [I64_MAX] * 2, "pads": [I64_MAX - 1] * 4}),
    "convt_huge_stride": lambda: one_op("ConvTranspose", {"strides": [2**62, 2**62]},
                                        [weight(3, 4, 3, 3)], extra_inputs=["w"]),
    "convt_same_huge_stride": lambda: one_op(
        "ConvTranspose", {"auto_pad": "SAME_UPPER", "strides": [2**62, 2**62]},
        [weight(3, 4, 3, 3)], extra_inputs=["w"]),
    # Scales whose result does not fit in int64 (float -> int64 conversion before the fix).
    "resize_huge_scale": lambda: one_op("Resize", {}, [scales(1, 1, 1e30, 1)],
                                        extra_inputs=["", "s"]),
    "resize_inf_scale": lambda: one_op("Resize", {}, [scales(1, 1, float("inf"), 1)],
                                       extra_inputs=["", "s"]),
    "upsample7_huge_scale": lambda: one_op("Upsample", {"scales": [1.0, 1.0, 1e20, 1.0]}, opset=7),
    # Declared types that conflict with what a value really is.
    "input_default_shape_conflict": lambda: model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [vi("x", [2, 3]), vi("w", [7, 7])], [vi("y", [2, 3])],
        [helper.make_tensor("w", F, [3], [1, 2, 3])]),
    "output_initializer_type_conflict": lambda: model(
        [], [vi("x", [2, 3])], [vi("w", [3], TensorProto.INT64)],
        [helper.make_tensor("w", F, [3], [1, 2, 3])]),
    "output_input_shape_conflict": lambda: model([], [vi("x", [2, 3])], [vi("x", [3, 2])]),
    # Valid models with graph outputs that are graph inputs or initializers directly.
    "output_passthrough": lambda: model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])],
        [vi("x", [2, 3]), vi("y", [2, 3]), vi("w", [3])],
        [helper.make_tensor("w", F, [3], [1, 2, 3])]),
    # Big graphs: a 10,000-node chain and a 5,000-node chain listed in reverse order.
    "relu_chain_10000": lambda: relu_chain(10000, False),
    "relu_chain_5000_reversed": lambda: relu_chain(5000, True),
    # External data ranges at the edge of int64.
    "external_offset_max": lambda: external(I64_MAX, 12),
    "external_length_max": lambda: external(I64_MAX, I64_MAX),
}


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    m = CASES[case]()
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    if case.startswith("external"):
        with open(os.path.join(out, "w.bin"), "wb") as f:
            f.write(b"\0" * 16)


if __name__ == "__main__":
    main()
