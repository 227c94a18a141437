# NCCL device communicator tests: the pure request planning as a plain gtest in dtc_gpu_tests
# (runs without a GPU), and dtc_nccl_check, the multi-rank check that needs 2 GPUs and mpirun
# (`mpirun -n 2 build/tests/gpu/dtc_nccl_check`; prints SKIP and exits 0 with fewer GPUs).
list(APPEND DTC_GPU_TEST_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/NcclPlanTest.cpp)
add_executable(dtc_nccl_check ${CMAKE_CURRENT_SOURCE_DIR}/nccl_check.cpp)
target_link_libraries(dtc_nccl_check PRIVATE dtc_rt_cuda dtc_comm)
add_test(NAME nccl_check COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe
  --bind-to none -n 2 $<TARGET_FILE:dtc_nccl_check>)
set_tests_properties(nccl_check PROPERTIES LABELS gpu TIMEOUT 300
  SKIP_REGULAR_EXPRESSION "SKIP: dtc_nccl_check needs 2 GPUs")
