# elementwise GPU tests (sources appended to DTC_GPU_TEST_SOURCES).
list(APPEND DTC_GPU_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ElementwiseTest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ElementwiseTrainTest.cpp
)
