# cuBLAS/cuDNN kernels: checks (pure C++) and kernels.
target_sources(dtc_target_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/DenseCheck.cpp
  ${CMAKE_CURRENT_LIST_DIR}/DensePlan.cpp
)
if(DTC_ENABLE_CUDA)
  target_sources(dtc_ops_cuda PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/Conv.cpp
    ${CMAKE_CURRENT_LIST_DIR}/DenseKernels.cu
    ${CMAKE_CURRENT_LIST_DIR}/MatMul.cpp
    ${CMAKE_CURRENT_LIST_DIR}/Norm.cpp
    ${CMAKE_CURRENT_LIST_DIR}/Pool.cpp
    ${CMAKE_CURRENT_LIST_DIR}/Softmax.cpp
  )
endif()
