# Sources of the nn operator family (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/AveragePool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/BatchNormalization.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Einsum.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ConvTranspose.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GlobalAveragePool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GroupNormalization.cpp
  ${CMAKE_CURRENT_LIST_DIR}/InstanceNormalization.cpp
  ${CMAKE_CURRENT_LIST_DIR}/LayerNormalization.cpp
  ${CMAKE_CURRENT_LIST_DIR}/MatMul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/MaxPool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NNCommon.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NormCommon.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Resize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Upsample.cpp
)
