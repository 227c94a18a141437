"""Runs the ONNX checker (with full shape-inference check) on an exported model; exit 1 on failure."""
import sys

import onnx

model = onnx.load(sys.argv[1], load_external_data=False)
onnx.checker.check_model(model, full_check=True)
print(f"ok: opset {[(o.domain or 'ai.onnx', o.version) for o in model.opset_import]}, "
      f"{len(model.graph.node)} nodes")
