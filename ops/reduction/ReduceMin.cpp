// ReduceMin: minimum over the given axes. ONNX ReduceMin-1/11 (axes attribute; 11 allows
// negative axes), -12 (int8, uint8), -13 (bfloat16), -18 (axes become an optional int64 input,
// plus noop_with_empty_axes), -20 (bool). Canonical: the opset-20 input form. A NaN in a slice
// gives NaN (numpy's min). Folds.
#include "ops/reduction/Reduce.h"

#include <cmath>
#include <limits>

namespace dtc::ops {

OpDef defineReduceMin() {
  OpDef d = reduceMinMaxDef("ReduceMin");
  d.fold = [](FoldContext &ctx) {
    return foldReduce(ctx, {std::numeric_limits<double>::infinity(),
                            [](double a, double x) { return x < a || std::isnan(x) ? x : a; },
                            [](double a, int64_t) { return a; }});
  };
  // Ties: split evenly among the minima, as ReduceMax (selectedElementsGradient).
  d.gradient = selectedElementsGradient;
  // One comparison per input element.
  d.cost = reductionCost();
  return d;
}

} // namespace dtc::ops
