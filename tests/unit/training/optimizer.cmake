# Test binary of the optimizer family: the optimizer pass and the CPU kernels of the ai.dtc
# optimizer ops.
dtc_unit_test(dtc_optimizer_tests
  SOURCES unit/training/OptimizerPassTest.cpp unit/training/OptimizerKernelTest.cpp
  LIBS dtc_gradcheck)
