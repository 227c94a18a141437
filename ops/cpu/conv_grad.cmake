# Sources of the ConvGrad family CPU kernels (listed, no globs).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ConvGrad.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ConvGradPool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ConvGradResize.cpp
)
