# Test binary of the tensor_grad family: gradient rules of the reduction, loss and tensor/shape/
# index ops (finite differences), and the ai.dtc TensorGrad kernels against reference loops.
dtc_unit_test(dtc_tensor_grad_tests
  SOURCES unit/training/TensorGradTest.cpp unit/training/TensorGradKernelTest.cpp
    unit/training/ReduceGradTest.cpp unit/training/SpaceDepthGradTest.cpp
  LIBS dtc_gradcheck)
