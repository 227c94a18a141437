// And: elementwise logical and of two bool tensors with multidirectional broadcasting (opset 7 on;
// the opset-1 form with `broadcast`/`axis` attributes predates dtc's opset range). Folds.
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineAnd() {
  return logicalDef("And", [](bool a, bool b) { return a && b; });
}

} // namespace dtc::ops
