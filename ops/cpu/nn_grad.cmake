# Sources of the NNGrad family CPU kernels (listed, no globs).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/NNGradMatMul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NNGradNorm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GroupNorm.cpp
)
list(APPEND DTC_CPU_OPENMP_SOURCES ${CMAKE_CURRENT_LIST_DIR}/NNGradNorm.cpp)
