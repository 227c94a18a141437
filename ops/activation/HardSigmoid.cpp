// HardSigmoid: elementwise max(0, min(1, alpha * x + beta)), alpha 0.2 and beta 0.5 by default
// (ONNX HardSigmoid-6, unchanged up to opset 21).
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineHardSigmoid() {
  OpDef d;
  d.name = "HardSigmoid";
  d.version(6)
      .in("X", "T")
      .out("Y", "T")
      .attr("alpha", ir::AttrKind::kFloat)
      .attr("beta", ir::AttrKind::kFloat)
      .type("T", kFloatNoBf16Types);
  d.infer = inferSameShape;
  // dX = alpha * dY where 0 < alpha * X + beta < 1 (strict: 0 at the two kinks, as PyTorch's
  // hardsigmoid_backward), else 0.
  d.gradient = [](GradientContext &ctx) {
    return eltwiseGradRule(ctx, "hardsigmoid", false, ctx.node().attrFloat("alpha", 0.2f),
                           ctx.node().attrFloat("beta", 0.5f));
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
