# Sources of the Optimizer family CPU kernels (listed, no globs). Optimizer.cpp alone is built
# with OpenMP (the runtime oneDNN already links, so its loops share oneDNN's thread pool and
# thread count); without OpenMP its pragmas are ignored and the loops run on one thread.
target_sources(dtc_ops_cpu PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/Optimizer.cpp
)
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/Optimizer.cpp
    PROPERTIES COMPILE_OPTIONS "${OpenMP_CXX_FLAGS}")
  target_link_libraries(dtc_ops_cpu PRIVATE ${OpenMP_CXX_LIBRARIES})
endif()
