// Neg: elementwise -x over floats and signed integers (ONNX Neg-6; Neg-13 adds bfloat16).
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineNeg() {
  OpDef d;
  d.name = "Neg";
  d.version(6).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types | kSignedIntTypes);
  d.version(13).type("T", kFloatTypes | kSignedIntTypes);
  d.infer = inferSameShape;
  // dX = -dY.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("Neg", {ctx.outputGrad(0)}));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
