# Hand-written CUDA kernels: elementwise, activations, reductions, losses, optimizers.
target_sources(dtc_target_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ElementwiseCheck.cpp
)
if(DTC_ENABLE_CUDA)
  target_sources(dtc_ops_cuda PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/Elementwise.cu
    ${CMAKE_CURRENT_LIST_DIR}/Loss.cu
    ${CMAKE_CURRENT_LIST_DIR}/Optimizer.cu
    ${CMAKE_CURRENT_LIST_DIR}/Reduce.cu
  )
endif()
