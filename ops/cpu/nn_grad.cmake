# Sources of the NNGrad family CPU kernels (listed, no globs).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/NNGradMatMul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NNGradNorm.cpp
)
