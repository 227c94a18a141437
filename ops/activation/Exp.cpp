// Exp: elementwise e^x (ONNX Exp-6; Exp-13 adds bfloat16).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineExp() {
  OpDef d;
  d.name = "Exp";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferSameShape;
  // dX = dY * Y (from the output).
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "exp_dst", true); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
