# Sources of the ActivationGrad family CPU kernels (listed, no globs). The hand loops of
# ActivationGradDropout.cpp and ActivationGradEltwise.cpp are built with OpenMP (as
# optimizer.cmake does: oneDNN's runtime, one thread pool); without it they run on one thread.
set(DTC_ACTIVATION_GRAD_OMP_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradDropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradEltwise.cpp
)
target_sources(dtc_ops_cpu PRIVATE
  ${DTC_ACTIVATION_GRAD_OMP_SOURCES}
  ${CMAKE_CURRENT_LIST_DIR}/ActivationGradSoftmax.cpp
)
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  set_source_files_properties(${DTC_ACTIVATION_GRAD_OMP_SOURCES}
    PROPERTIES COMPILE_OPTIONS "${OpenMP_CXX_FLAGS}")
  target_link_libraries(dtc_ops_cpu PRIVATE ${OpenMP_CXX_LIBRARIES})
else()
  set_source_files_properties(${DTC_ACTIVATION_GRAD_OMP_SOURCES}
    PROPERTIES COMPILE_OPTIONS "-Wno-unknown-pragmas")
endif()
