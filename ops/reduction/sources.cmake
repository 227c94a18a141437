# Sources of the reduction operator family (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ArgMax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ArgMin.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ArgReduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/CheckLabels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/CumSum.cpp
  ${CMAKE_CURRENT_LIST_DIR}/NegativeLogLikelihoodLoss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Reduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceFamily.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceL1.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceL2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceLogSumExp.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceMax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceMean.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceMin.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceProd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceSum.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ReduceSumSquare.cpp
  ${CMAKE_CURRENT_LIST_DIR}/SoftmaxCrossEntropyLoss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/TopK.cpp
)
