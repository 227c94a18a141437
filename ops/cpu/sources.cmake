# Kernel sources of dtc_ops_cpu (one file per op family).
