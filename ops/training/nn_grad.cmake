# Sources of the NNGrad family op definitions (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
)
