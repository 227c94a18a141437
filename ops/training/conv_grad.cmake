# Sources of the ConvGrad family op definitions (listed, no globs).
target_sources(dtc_ops_defs PRIVATE
)
