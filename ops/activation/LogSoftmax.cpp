// LogSoftmax: x - log(sum(exp(x))) along one axis (opset 13 form, axis default -1). The
// pre-13 forms (versions 1 and 11, which flatten the input to 2-D at `axis`, default 1) are
// rewritten into that form by softmaxFamilyDef's normalization (ops/activation/Activation.cpp).
#include "ops/activation/Activation.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineLogSoftmax() {
  OpDef d = softmaxFamilyDef("LogSoftmax");
  // dX = dY - exp(Y) * sum(dY, axis), from the output: one ai.dtc.LogSoftmaxGrad (oneDNN logsoftmax
  // backward) over the canonical form's one axis.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("LogSoftmaxGrad", {ctx.outputGrad(0), ctx.output(0)},
                                   {{"axis", ir::Attribute(ctx.node().attrInt("axis", -1))}},
                                   "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // x - max - log(sum(exp(x - max))): per element max, subtract, exp, sum, subtract (5 FLOPs),
  // plus one log per row along `axis`.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    const std::vector<int64_t> &dims = ctx.inputDims(0);
    int64_t r = static_cast<int64_t>(dims.size());
    int64_t axis = ctx.node().attrInt("axis", -1);
    axis = axis < 0 ? axis + r : axis;
    if (axis < 0 || axis >= r)
      return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(r));
    double n = ctx.inputElements(0);
    double rows = dims[axis] > 0 ? n / static_cast<double>(dims[axis]) : 0;
    return ctx.withFlops(5 * n + rows);
  };
  d.sharding = softmaxSharding();
  return d;
}

} // namespace dtc::ops
