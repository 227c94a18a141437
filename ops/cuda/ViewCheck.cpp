// Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity): any dtype, the bytes unchanged.
#include "ops/cuda/Checks.h"

namespace dtc::ops::cuda {

Status checkView(const KernelSpec &spec) {
  if (spec.inputs.empty() || spec.outputs.empty() ||
      spec.inputs[0].byteSize() != spec.outputs[0].byteSize())
    return spec.error("a view's output must have its input's size");
  return Status::ok();
}

} // namespace dtc::ops::cuda
