# runtime GPU tests (sources appended to DTC_GPU_TEST_SOURCES): the CUDA device and the executor
# on CUDA plans (RuntimeTest.cpp, which runs dtc-compile as a tool and links the runtime), and
# the model-level parity script (gpu_parity.py: inference and 1/20-step training of the bundled
# models on cuda vs cpu; exit code 77, reported as skipped, without a GPU).
list(APPEND DTC_GPU_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/RuntimeTest.cpp
)
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/RuntimeTest.cpp PROPERTIES
  COMPILE_DEFINITIONS
  "DTC_GPU_TEST_TOOLS_DIR=\"${CMAKE_BINARY_DIR}/tools\";DTC_GPU_TEST_SOURCE_DIR=\"${CMAKE_SOURCE_DIR}\"")
target_link_libraries(dtc_gpu_test_util PUBLIC dtc_runtime)
add_test(NAME gpu_e2e_parity
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/gpu_parity.py --build ${CMAKE_BINARY_DIR})
set_tests_properties(gpu_e2e_parity PROPERTIES LABELS "gpu;e2e" SKIP_RETURN_CODE 77 TIMEOUT 600)
