# data GPU tests (sources appended to DTC_GPU_TEST_SOURCES): DataUtilTest checks the kernels'
# index math on the host (runs without a GPU); DataTest compares every kernel with the CPU's.
list(APPEND DTC_GPU_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/DataTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/DataUtilTest.cpp
)
