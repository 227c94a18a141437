# Hand-written CUDA kernels: elementwise, activations, reductions, losses, optimizers.
target_sources(dtc_target_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ElementwiseCheck.cpp
)
if(DTC_ENABLE_CUDA)
  # CMake 3.25 knows nvcc's -std flags up to C++17 only: without these, the first .cu source of
  # dtc_ops_cuda (CUDA_STANDARD 20) stops the configuration ("requires the language dialect
  # CUDA20"). nvcc 12+ takes -std=c++20.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  target_sources(dtc_ops_cuda PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/Elementwise.cu
    ${CMAKE_CURRENT_LIST_DIR}/Loss.cu
    ${CMAKE_CURRENT_LIST_DIR}/Optimizer.cu
    ${CMAKE_CURRENT_LIST_DIR}/Reduce.cu
  )
endif()
