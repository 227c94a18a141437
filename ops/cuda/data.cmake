# Hand-written CUDA kernels that move data (transpose, slice, concat, gather, resize, ...).
target_sources(dtc_target_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/DataCheck.cpp
)
if(DTC_ENABLE_CUDA)
  # CMake 3.25 does not know nvcc's C++20 flag (CMAKE_CUDA_STANDARD 20 then fails at generation
  # once the target has a .cu source); nvcc 12+ takes -std=c++20. Set for this directory only.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
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
