# Sources of the elementwise operator family (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Add.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Div.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Equal.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Greater.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Less.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Mul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Not.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Pow.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Sub.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Where.cpp
)
