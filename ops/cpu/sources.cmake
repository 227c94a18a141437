# Kernel sources of dtc_ops_cpu (one file per op family; Kernel.cpp is the registry).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Binary.cpp
  ${CMAKE_CURRENT_LIST_DIR}/BatchNorm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Eltwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/MatMul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Softmax.cpp
)
