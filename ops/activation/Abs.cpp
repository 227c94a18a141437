// Abs: elementwise |x| over every numeric type (ONNX Abs-6; Abs-13 adds bfloat16).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineAbs() {
  OpDef d;
  d.name = "Abs";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types | kIntTypes);
  d.version(13).type("T", kNumericTypes);
  d.infer = inferSameShape;
  // dX = dY * sign(X), with sign(0) = 0 (PyTorch's abs backward).
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "abs", false); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
