// LeakyRelu: elementwise x >= 0 ? x : alpha * x, alpha defaults to 0.01 (ONNX LeakyRelu-6;
// LeakyRelu-16 adds bfloat16). Same form in every version from opset 7 on.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineLeakyRelu() {
  OpDef d;
  d.name = "LeakyRelu";
  d.version(6)
      .in("X", "T")
      .out("Y", "T")
      .attr("alpha", ir::AttrKind::kFloat)
      .type("T", kFloatNoBf16Types);
  d.version(16).type("T", kFloatTypes);
  d.infer = inferSameShape;
  // dX = X > 0 ? dY : alpha * dY (alpha * dY at X = 0, as PyTorch's leaky_relu_backward). With
  // alpha >= 0 the sign of Y is the sign of X, so the rule reads Y (the forward may run in place).
  d.gradient = [](GradientContext &ctx) {
    const float alpha = ctx.node().attrFloat("alpha", 0.01f);
    return eltwiseGradRule(ctx, alpha >= 0.f ? "relu_dst" : "relu", alpha >= 0.f, alpha);
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
