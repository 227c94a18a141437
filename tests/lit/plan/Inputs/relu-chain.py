"""Prints an ONNX text model: MatMul, a chain of N Relus (argv[1]), MatMul; 4 features, so that
tp=3 splits the first MatMul's columns unevenly (2, 1, 1) and the split runs down the chain
(parallel-compile-stack.test)."""
import sys

n = int(sys.argv[1])
eye = "{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}"
print('<ir_version: 8, opset_import: ["" : 14]>')
print("agraph (float[N, 4] x) => (float[N, 4] y)")
print(f"<float[4, 4] w1 = {eye}, float[4, 4] w2 = {eye}>")
print("{")
print("  h = MatMul (x, w1)")
prev = "h"
for i in range(n):
    print(f"  a{i} = Relu ({prev})")
    prev = f"a{i}"
print(f"  y = MatMul ({prev}, w2)")
print("}")
