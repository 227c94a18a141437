// LessOrEqual: elementwise A <= B with broadcasting; bool output (opset 12; opset 16 only adds
// bfloat16). NaN compares false, as IEEE 754 and numpy. Exports build causal masks from
// Range/LessOrEqual/Where; with static shapes they fold. Folds.
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineLessOrEqual() {
  return comparisonDef("LessOrEqual", 12, kNumericTypes, [](double a, double b) { return a <= b; });
}

} // namespace dtc::ops
