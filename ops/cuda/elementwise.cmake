# Hand-written CUDA kernels: elementwise, activations, reductions, losses, optimizers.
target_sources(dtc_target_cuda PRIVATE
)
if(DTC_ENABLE_CUDA)
  target_sources(dtc_ops_cuda PRIVATE
  )
endif()
