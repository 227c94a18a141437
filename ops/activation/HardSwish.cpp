// HardSwish: elementwise x * max(0, min(1, x/6 + 1/2)) (ONNX HardSwish-14, the first version:
// the op does not exist before opset 14).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineHardSwish() {
  OpDef d;
  d.name = "HardSwish";
  d.version(14).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.infer = inferSameShape;
  // dX = 0 for X < -3, dY * (X / 3 + 1/2) for -3 <= X <= 3, dY for X > 3 (PyTorch's
  // hardswish_backward, kinks included).
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "hardswish", false); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
