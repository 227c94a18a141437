# Hand-written CUDA kernels that move data (transpose, slice, concat, gather, resize, ...).
target_sources(dtc_target_cuda PRIVATE
)
if(DTC_ENABLE_CUDA)
  target_sources(dtc_ops_cuda PRIVATE
  )
endif()
