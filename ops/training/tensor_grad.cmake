# Sources of the TensorGrad family op definitions (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradGather.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradGatherElements.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradGatherND.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradNegativeLogLikelihoodLoss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradSlice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorGradSoftmaxCrossEntropyLoss.cpp
)
