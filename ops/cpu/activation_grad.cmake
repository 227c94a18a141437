# Sources of the ActivationGrad family CPU kernels (listed, no globs).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradDropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradEltwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradSoftmax.cpp
)
