// Reciprocal: elementwise 1/x (ONNX Reciprocal-6; Reciprocal-13 adds bfloat16).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineReciprocal() {
  OpDef d;
  d.name = "Reciprocal";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferSameShape;
  // dX = -dY * Y^2 (= -dY / X^2), from the output.
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "reciprocal_dst", true); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
