// BitwiseXor: elementwise bitwise xor of two integer tensors of one type with
// multidirectional broadcasting (ONNX BitwiseXor-18). Folds; no gradient (integers).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineBitwiseXor() {
  return bitwiseDef("BitwiseXor", [](int64_t a, int64_t b) { return a ^ b; });
}

} // namespace dtc::ops
