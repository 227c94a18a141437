// BitwiseAnd: elementwise bitwise and of two integer tensors of one type with
// multidirectional broadcasting (ONNX BitwiseAnd-18). Folds; no gradient (integers).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineBitwiseAnd() {
  return bitwiseDef("BitwiseAnd", [](int64_t a, int64_t b) { return a & b; });
}

} // namespace dtc::ops
