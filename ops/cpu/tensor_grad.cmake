# Sources of the TensorGrad family CPU kernels (listed, no globs).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradIndex.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradLoss.cpp
)
