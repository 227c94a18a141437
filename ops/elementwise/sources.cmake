# Sources of the elementwise operator family (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Add.cpp
  ${CMAKE_CURRENT_LIST_DIR}/And.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Div.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Equal.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Greater.cpp
  ${CMAKE_CURRENT_LIST_DIR}/GreaterOrEqual.cpp
  ${CMAKE_CURRENT_LIST_DIR}/IsInf.cpp
  ${CMAKE_CURRENT_LIST_DIR}/IsNaN.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Less.cpp
  ${CMAKE_CURRENT_LIST_DIR}/LessOrEqual.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Max.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Mean.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Min.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Mod.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Mul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Not.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Or.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Pow.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Sub.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Sum.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Where.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Xor.cpp
)
