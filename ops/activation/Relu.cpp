// Relu: elementwise max(x, 0) (ONNX Relu-6; Relu-13 adds bfloat16; Relu-14 adds the signed
// integer types).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineRelu() {
  OpDef d;
  d.name = "Relu";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.version(14).type("T", kFloatTypes | kSignedIntTypes);
  d.infer = inferSameShape;
  // dX = Y > 0 ? dY : 0, from the output: 0 at X = 0, as PyTorch (threshold_backward).
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "relu_dst", true); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
