# Test binary of the opset-23 function ops (RMSNormalization, RotaryEmbedding, Attention):
# imported from ONNX text, expanded into primitive ops, gradients checked by finite differences.
dtc_unit_test(dtc_function_ops_grad_tests
  SOURCES unit/training/FunctionOpsGradTest.cpp
  LIBS dtc_gradcheck)
