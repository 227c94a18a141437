# Test binary of the activation_grad family: gradient rules of ops/elementwise and
# ops/activation (finite differences and conventions) and the ActivationGrad CPU kernels.
dtc_unit_test(dtc_activation_grad_tests
  SOURCES unit/training/ActivationGradTest.cpp unit/training/ActivationGradKernelTest.cpp
          unit/training/ActivationGradUnaryTest.cpp
  LIBS dtc_gradcheck)
