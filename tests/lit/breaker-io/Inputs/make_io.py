#!/usr/bin/env python3
# Writes the models and data files of the tests in tests/lit/breaker-io (hostile file names,
# sizes and kinds): `make_io.py CASE OUT_DIR`. Deterministic; needs the onnx and numpy packages.
import os
import struct
import sys
import zipfile
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper

F = TensorProto.FLOAT


def save(m, out):
    m.ir_version = 8
    onnx.save(m, os.path.join(out, "model.onnx"))


def linear(weight_name, node_name="mm", op="MatMul", w_shape=(4, 3)):
    """y = x @ W: a trainable model (--loss mse)."""
    w = helper.make_tensor(weight_name, F, list(w_shape), [0.5] * int(np.prod(w_shape)))
    node = helper.make_node(op, ["x", weight_name], ["y"], name=node_name)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, ["N", 4])],
                              [helper.make_tensor_value_info("y", F, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def zip_bomb(path, junk_bytes):
    """An .npz with a valid x/label pair and a member 'junk' of `junk_bytes` zeros, deflated
    (about 1 MB per GB): a reader that inflates every member needs junk_bytes of memory."""
    def npy_header(shape):
        d = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
            ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))
        pad = 64 - (10 + len(d) + 1) % 64
        d = d + " " * pad + "\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode()

    with zipfile.ZipFile(path, "w") as z:
        for name, arr in (("x", np.ones((8, 4), np.float32)), ("label", np.ones((8, 3), np.float32))):
            z.writestr(name + ".npy", npy_header(arr.shape) + arr.tobytes())
        info = zipfile.ZipInfo("junk.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            f.write(npy_header((junk_bytes // 4,)))
            chunk = bytes(1 << 24)
            left = junk_bytes
            while left:
                n = min(left, len(chunk))
                f.write(chunk[:n])
                left -= n


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if case == "long_name":
        save(linear("w" * 100000), out)
    elif case == "linear":
        save(linear("w"), out)
        np.savez(os.path.join(out, "train.npz"), x=np.ones((8, 4), np.float32),
                 label=np.ones((8, 3), np.float32))
    elif case == "newline_name":
        save(linear("w", node_name="mm\nerror: forged line", op="NoSuchOp"), out)
    elif case == "gemm_zero_features":
        save(linear("fc.weight", node_name="fc", op="Gemm", w_shape=(4, 0)), out)
    elif case == "zip_bomb":
        zip_bomb(os.path.join(out, "bomb.npz"), int(sys.argv[3]))
    else:
        sys.exit("unknown case " + case)


if __name__ == "__main__":
    main()
