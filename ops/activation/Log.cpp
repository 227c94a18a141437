// Log: elementwise natural logarithm (ONNX Log-6; Log-13 adds bfloat16).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineLog() {
  OpDef d;
  d.name = "Log";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferSameShape;
  // dX = dY / X (inf at X = 0, NaN-free only for X > 0, as PyTorch).
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "log", false); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
