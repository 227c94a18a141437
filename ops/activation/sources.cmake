# Sources of the activation operator family (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Abs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Activation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Cast.cpp
  ${CMAKE_CURRENT_LIST_DIR}/CastLike.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Clip.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Erf.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Exp.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Gelu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/HardSigmoid.cpp
  ${CMAKE_CURRENT_LIST_DIR}/HardSwish.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Identity.cpp
  ${CMAKE_CURRENT_LIST_DIR}/LeakyRelu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Log.cpp
  ${CMAKE_CURRENT_LIST_DIR}/LogSoftmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Neg.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Reciprocal.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Relu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Sigmoid.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Sqrt.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Tanh.cpp
)
