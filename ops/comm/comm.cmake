# Sources of the collective op definitions (ops/comm/; listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/AllReduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/PointToPoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceScatter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorParallel.cpp
)
