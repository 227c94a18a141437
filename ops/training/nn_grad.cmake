# Sources of the NNGrad family op definitions (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/NNGradMatMul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NNGradNorm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NNGradGroupNorm.cpp
)
