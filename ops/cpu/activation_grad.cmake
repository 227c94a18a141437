# Sources of the ActivationGrad family CPU kernels (listed, no globs).
target_sources(dtc_ops_cpu PRIVATE
)
