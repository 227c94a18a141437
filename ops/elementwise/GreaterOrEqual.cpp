// GreaterOrEqual: elementwise A >= B with broadcasting; bool output (opset 12; opset 16 only adds
// bfloat16). NaN compares false, as IEEE 754 and numpy. Folds.
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineGreaterOrEqual() {
  return comparisonDef("GreaterOrEqual", 12, kNumericTypes,
                       [](double a, double b) { return a >= b; });
}

} // namespace dtc::ops
