set(DTC_CPU_KERNEL_TEST_SOURCES unit/cpu/KernelTest.cpp)
