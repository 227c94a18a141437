"""Helper of ../infer-training-export.test: compares dtc's output with onnxruntime's, or writes a
copy of the model whose first BatchNormalization's running mean is a graph output."""
import sys

import numpy as np
import onnx

if sys.argv[1] == "--expose-running-mean":
    m = onnx.load(sys.argv[2])
    bn = next(n for n in m.graph.node if n.op_type == "BatchNormalization")
    if len(bn.output) < 2 or not bn.output[1]:
        bn.output.extend([""] * (2 - len(bn.output)))
        bn.output[1] = "exposed_running_mean"
    m.graph.output.append(onnx.helper.make_tensor_value_info(bn.output[1], onnx.TensorProto.FLOAT, None))
    onnx.save(m, sys.argv[3])
    sys.exit(0)

import onnxruntime as ort

model, inputs, outputs = sys.argv[1:4]
x = np.load(inputs)["input"]
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
ref = sess.run(None, {"input": x})[0]
got = np.load(outputs)["logits"]
diff = float(np.max(np.abs(ref - got)))
print(f"max abs difference to onnxruntime {'below' if diff < 1e-4 else 'ABOVE'} 1e-4 ({diff:.3g})")
