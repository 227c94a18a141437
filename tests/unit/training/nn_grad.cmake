# Test binary of the nn_grad family: gradient rules of MatMul, Gemm, BatchNormalization
# (training and inference mode), LayerNormalization, and the kernels of their ai.dtc ops
# (synchronized batch normalization over a fake data-parallel group included).
dtc_unit_test(dtc_nn_grad_tests
  SOURCES unit/training/NNGradTest.cpp unit/training/NNGradKernelTest.cpp
          unit/training/SyncBatchNormTest.cpp
          unit/training/NormGradTest.cpp unit/training/EinsumTopKGradTest.cpp
  LIBS dtc_gradcheck)
