# Hand-written CUDA kernels that move data (transpose, slice, concat, gather, resize, ...).
target_sources(dtc_target_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/DataCheck.cpp
)
if(DTC_ENABLE_CUDA)
  target_sources(dtc_ops_cuda PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/Data.cu
    ${CMAKE_CURRENT_LIST_DIR}/Generate.cu
    ${CMAKE_CURRENT_LIST_DIR}/Index.cu
  )
  # Resize's coordinates must match the CPU's bit for bit (nearest rounding at exact halves):
  # no fused multiply-add contraction in its double-precision coordinate math.
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/Index.cu PROPERTIES COMPILE_OPTIONS
    "--fmad=false")
endif()
