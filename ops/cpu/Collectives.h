// Collectives a CPU kernel may call while it runs: synchronized BatchNormalization (--sync-batchnorm)
// sums its per-channel statistics over the data-parallel group. The runtime's communicator
// implements this interface (runtime/comm/Communicator.h); kernels see it through
// CpuContext::collectives, which is null on one rank.
#pragma once

#include "compiler/support/Status.h"

#include <cstddef>
#include <string>

namespace dtc::ops::cpu {

class KernelCollectives {
public:
  virtual ~KernelCollectives() = default;
  /// Replaces `data[0..count)` on every rank of the group by its element-wise sum over the
  /// group. Blocking; every rank must make the same calls in the same order (they do: every
  /// rank runs the same instruction list). `what` names the caller for errors and traces
  /// ("node 'bn1' (BatchNormTraining)"). Errors: a lost or unresponsive peer (naming it).
  virtual Status allReduceSum(double *data, size_t count, const std::string &what) = 0;
  /// Number of ranks in the group (1: nothing to reduce).
  virtual int groupSize() const = 0;
};

} // namespace dtc::ops::cpu
