// Collectives a CPU kernel may call while it runs (synchronized BatchNormalization): the
// backend-neutral interface of ops/kernel/Kernel.h under its CPU name. Kernels see it through
// CpuContext::collectives, which is null on one rank.
#pragma once

#include "ops/kernel/Kernel.h"

namespace dtc::ops::cpu {

using ops::KernelCollectives;

} // namespace dtc::ops::cpu
