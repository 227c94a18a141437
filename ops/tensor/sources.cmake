# Sources of the tensor operator family (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Concat.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Constant.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ConstantOfShape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Expand.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Flatten.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Gather.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GatherElements.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GatherND.cpp
  ${CMAKE_CURRENT_LIST_DIR}/OneHot.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Pad.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Range.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Reshape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ScatterElements.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ScatterND.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Size.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Slice.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Split.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Squeeze.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TensorCommon.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Tile.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Transpose.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Trilu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Unsqueeze.cpp
)
