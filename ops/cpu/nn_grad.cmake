# Sources of the NNGrad family CPU kernels (listed, no globs).
target_sources(dtc_ops_cpu PRIVATE
)
