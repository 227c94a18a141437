# Sources of the ConvGrad family op definitions (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ConvGradOps.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ConvGradRules.cpp
)
