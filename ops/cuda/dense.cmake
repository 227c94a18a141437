# cuBLAS/cuDNN kernels: checks (pure C++) and kernels.
target_sources(dtc_target_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/DenseCheck.cpp
  ${CMAKE_CURRENT_LIST_DIR}/DensePlan.cpp
)
if(DTC_ENABLE_CUDA)
  # CMake 3.25 knows no C++20 flag for nvcc (CMAKE_CUDA_STANDARD 20 fails at generation as soon as
  # dtc_ops_cuda has a .cu source); nvcc 12+ takes -std=c++20. Read at generation time from this
  # directory (ops/cuda), so it applies to every family's .cu files.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  target_sources(dtc_ops_cuda PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/Conv.cpp
    ${CMAKE_CURRENT_LIST_DIR}/DenseKernels.cu
    ${CMAKE_CURRENT_LIST_DIR}/MatMul.cpp
    ${CMAKE_CURRENT_LIST_DIR}/Norm.cpp
    ${CMAKE_CURRENT_LIST_DIR}/Pool.cpp
    ${CMAKE_CURRENT_LIST_DIR}/Softmax.cpp
  )
endif()
