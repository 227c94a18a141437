# Sources of the ActivationGrad family CPU kernels (listed, no globs). The hand loops of
# ActivationGradDropout.cpp and ActivationGradEltwise.cpp use OpenMP (see
# DTC_CPU_OPENMP_SOURCES in ops/cpu/CMakeLists.txt).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradDropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradEltwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradSoftmax.cpp
)
list(APPEND DTC_CPU_OPENMP_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradDropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradEltwise.cpp
)
