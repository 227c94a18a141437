// Softmax: exp(x) / sum(exp(x)) along one axis (opset 13 form, axis default -1). The
// pre-13 forms (versions 1 and 11, which flatten the input to 2-D at `axis`, default 1) are
// rewritten into that form by softmaxFamilyDef's normalization (ops/activation/Activation.cpp).
#include "ops/activation/Activation.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineSoftmax() {
  OpDef d = softmaxFamilyDef("Softmax");
  // dX = Y * (dY - sum(dY * Y, axis)), from the output: one ai.dtc.SoftmaxGrad (oneDNN softmax
  // backward) over the canonical form's one axis.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("SoftmaxGrad", {ctx.outputGrad(0), ctx.output(0)},
                                   {{"axis", ir::Attribute(ctx.node().attrInt("axis", -1))}},
                                   "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // Per element: max, subtract, exp, sum, divide (the numerically stable form, as oneDNN and
  // cuDNN compute it): 5 FLOPs.
  d.cost = elementwiseCost(5);
  d.sharding = softmaxSharding();
  return d;
}

} // namespace dtc::ops
