// Tanh: elementwise hyperbolic tangent (ONNX Tanh-6; Tanh-13 adds bfloat16).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineTanh() {
  OpDef d;
  d.name = "Tanh";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferSameShape;
  // dX = dY * (1 - Y^2), from the output.
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "tanh_dst", true); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
