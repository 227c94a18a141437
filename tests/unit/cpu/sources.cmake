# Sources of dtc_cpu_kernel_tests (paths relative to tests/).
set(DTC_CPU_KERNEL_TEST_SOURCES
  unit/cpu/ConvPoolTest.cpp
  unit/cpu/KernelTest.cpp
  unit/cpu/LayoutTest.cpp
  unit/cpu/MathKernelTest.cpp
  unit/cpu/CompareTest.cpp
  unit/cpu/VariadicScanIndexTest.cpp
  unit/cpu/UnaryTest.cpp
  unit/cpu/IndexTest.cpp
  unit/cpu/NNTest.cpp
  unit/cpu/ResizeTest.cpp
  unit/cpu/LayoutUnetTest.cpp
  unit/cpu/NanSemanticsTest.cpp
  unit/cpu/NormEinsumTopKTest.cpp
  unit/cpu/TargetTest.cpp
  unit/cpu/MixedPrecisionTest.cpp
)
