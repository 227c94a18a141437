# Sources of the TensorGrad family op definitions (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
)
