# Sources of the Optimizer family CPU kernels (listed, no globs). Its loops use OpenMP (see
# DTC_CPU_OPENMP_SOURCES in ops/cpu/CMakeLists.txt).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Optimizer.cpp
)
list(APPEND DTC_CPU_OPENMP_SOURCES ${CMAKE_CURRENT_LIST_DIR}/Optimizer.cpp)
