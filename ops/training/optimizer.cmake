# Sources of the Optimizer family op definitions (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Optimizer.cpp
)
