// ReduceMean: mean over the given axes. ONNX ReduceMean-1/11 (axes attribute; 11 allows
// negative axes), -13 (bfloat16), -18 (axes become an optional int64 input, plus
// noop_with_empty_axes). Canonical: the opset-18 input form.
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineReduceMean() {
  OpDef d = reduceDef("ReduceMean");
  // dX = dY broadcast back over the reduced axes, divided by the number of reduced elements
  // (the product of the reduced dims; no scaling when that is 0: the input is then empty).
  d.gradient = [](GradientContext &ctx) -> Status {
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reducedAxes(ctx));
    const std::vector<int64_t> in = ctx.input(0)->shape().staticSizes();
    int64_t count = 1;
    for (int64_t a : axes)
      count *= in[static_cast<size_t>(a)];
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, broadcastReduceGrad(ctx, ctx.outputGrad(0)));
    if (count > 1) {
      DTC_ASSIGN_OR_RETURN(
          dx, ctx.emit1("Mul", {dx, ctx.constantF32(1.0f / static_cast<float>(count))}));
    }
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // One add per input element and one divide per output element.
  d.cost = reductionCost(1, 1);
  return d;
}

} // namespace dtc::ops
