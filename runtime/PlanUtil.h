// Small helpers the runtime's files share for reading plans and writing messages: a buffer's
// shape, "f32[2,3]" type text, and an input/output binding's buffer by name.
#pragma once

#include "compiler/plan/Plan.h"
#include "ops/cpu/Kernel.h"

#include <string>
#include <vector>

namespace dtc::rt {

/// "f32[2,3]" (TensorDesc::str).
inline std::string typeStr(ir::DType dtype, const std::vector<int64_t> &shape) {
  return ops::cpu::TensorDesc{dtype, shape}.str();
}

inline std::vector<int64_t> shapeOf(const plan::Buffer &b) {
  return std::vector<int64_t>(b.shape().begin(), b.shape().end());
}

/// The buffer index bound to `name`, or -1.
inline int findBinding(const google::protobuf::RepeatedPtrField<plan::Binding> &bindings,
                       const std::string &name) {
  for (const plan::Binding &b : bindings)
    if (b.name() == name)
      return b.buffer();
  return -1;
}

} // namespace dtc::rt
