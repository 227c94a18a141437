// The CUDA target's per-family checks and in-place rules, declared from ops/cuda/Kernels.def.
// Pure C++: the compiler links them without the CUDA libraries.
#pragma once

#include "ops/kernel/Kernel.h"

namespace dtc::ops::cuda {

#define DTC_CUDA_KERNEL(domain, op, check, create, inPlace, view)                                  \
  Status check(const KernelSpec &spec);                                                            \
  int inPlace(const KernelSpec &spec);
#include "ops/cuda/Kernels.def"
#undef DTC_CUDA_KERNEL

/// Errors unless every present operand's dtype is in `allowed`, naming the operand, its dtype
/// and what the CUDA kernel supports.
Status checkDTypes(const KernelSpec &spec, const std::vector<ir::DType> &allowed);
/// Errors unless input `index` (present) has a dtype in `allowed`.
Status checkInputDType(const KernelSpec &spec, size_t index, const std::vector<ir::DType> &allowed);
/// Errors unless output `index` has a dtype in `allowed`.
Status checkOutputDType(const KernelSpec &spec, size_t index, const std::vector<ir::DType> &allowed);
/// 0 when output 0 has input 0's dtype and byte size (an elementwise op may write over it),
/// else -1.
int sameAsInput0(const KernelSpec &spec);

} // namespace dtc::ops::cuda
