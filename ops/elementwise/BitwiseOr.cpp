// BitwiseOr: elementwise bitwise or of two integer tensors of one type with
// multidirectional broadcasting (ONNX BitwiseOr-18). Folds; no gradient (integers).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineBitwiseOr() {
  return bitwiseDef("BitwiseOr", [](int64_t a, int64_t b) { return a | b; });
}

} // namespace dtc::ops
