// ReduceMax: maximum over the given axes. ONNX ReduceMax-1/11 (axes attribute; 11 allows
// negative axes), -12 (int8, uint8), -13 (bfloat16), -18 (axes become an optional int64 input,
// plus noop_with_empty_axes), -20 (bool). Canonical: the opset-20 input form.
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineReduceMax() {
  OpDef d = reduceMinMaxDef("ReduceMax");
  // Ties: split evenly among the maxima (selectedElementsGradient; this overrides the
  // first-maximal-element default of ops/Gradient.h for ReduceMax).
  d.gradient = selectedElementsGradient;
  // One comparison per input element.
  d.cost = reductionCost();
  return d;
}

} // namespace dtc::ops
