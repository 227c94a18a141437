"""Checks a model written by dtc-compile --emit onnx --rank R against its source model: the ONNX
checker accepts it (full check: types and shapes of the standard ops, ai.dtc nodes as a custom
domain), and every initializer equals the source's tensor or, for a tensor-parallel split
weight, the rank's part of it along the axis where the shapes differ (part tp of parts equal
slices, as ir::sliceShard cuts them; with TP_SIZE, an axis that does not divide by it is cut as
numpy.array_split cuts it). Prints one line per initializer, then the opset domains,
the op types and the graph outputs, for FileCheck.

Usage: check_rank_onnx.py RANK_MODEL SOURCE_MODEL TP_INDEX [TP_SIZE]
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

rank_path, source_path, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
tp_size = int(sys.argv[4]) if len(sys.argv) > 4 else None
model = onnx.load(rank_path)
onnx.checker.check_model(model, full_check=True)
source = {t.name: numpy_helper.to_array(t) for t in onnx.load(source_path).graph.initializer}
for t in model.graph.initializer:
    part = numpy_helper.to_array(t)
    whole = source.get(t.name)
    if whole is None:
        print(f"{t.name} {list(part.shape)} new")  # optimizer state, constants
        continue
    axes = [a for a in range(whole.ndim) if whole.shape[a] != part.shape[a]]
    if not axes:
        assert np.array_equal(part, whole), t.name
        print(f"{t.name} {list(part.shape)} whole")
        continue
    assert len(axes) == 1, t.name
    if tp_size and whole.shape[axes[0]] % tp_size:
        # An uneven split (numpy.array_split: the first size % T ranks hold one row more).
        a = axes[0]
        assert np.array_equal(part, np.array_split(whole, tp_size, axis=a)[tp]), t.name
        print(f"{t.name} {list(part.shape)} array_split part {tp} of {tp_size} along axis {a}")
        continue
    assert whole.shape[axes[0]] % part.shape[axes[0]] == 0, t.name
    a, n = axes[0], part.shape[axes[0]]
    parts = whole.shape[a] // n
    # A fused Q/K/V weight is 3 blocks, each split in `parts`: part tp of every block.
    for blocks in (1, 3):
        if n % blocks or whole.shape[a] % (blocks * parts):
            continue
        block, m = whole.shape[a] // blocks, n // blocks
        rows = [k * block + tp * m + i for k in range(blocks) for i in range(m)]
        if np.array_equal(part, np.take(whole, rows, axis=a)):
            break
    else:
        raise AssertionError(f"{t.name}: not part {tp} of axis {a}")
    print(f"{t.name} {list(part.shape)} part {tp} of {parts} along axis {a}" +
          (f" in {blocks} blocks" if blocks > 1 else ""))
print("domains", sorted(o.domain for o in model.opset_import))
print("ops", " ".join(sorted({(n.domain + "." if n.domain else "") + n.op_type
                               for n in model.graph.node})))
print("outputs", " ".join(o.name for o in model.graph.output))
