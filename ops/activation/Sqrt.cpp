// Sqrt: elementwise square root (ONNX Sqrt-6; Sqrt-13 adds bfloat16). NaN for negative
// inputs, as in the spec.
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineSqrt() {
  OpDef d;
  d.name = "Sqrt";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferSameShape;
  // dX = dY / (2 Y) from the output (oneDNN sqrt backward). At X = 0 this is dY / 0 = +inf for
  // dY > 0 (-inf for dY < 0, NaN for dY = 0), as PyTorch's sqrt backward.
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "sqrt_dst", true); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
