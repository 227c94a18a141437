# Kernel sources of dtc_ops_cpu (one file per op family; Kernel.cpp is the registry).
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Binary.cpp
  ${CMAKE_CURRENT_LIST_DIR}/BatchNorm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Eltwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/MatMul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Reorder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Cast.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Compare.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Unary.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Index.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Deconv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Resize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Variadic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/CumSum.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ArgReduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Trilu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GatherElements.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GatherND.cpp
)
