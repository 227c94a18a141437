// ReduceSum: sum over the given axes. ONNX ReduceSum-1/11 (axes attribute; 11 allows negative
// axes), -13 (axes become an optional int64 input, plus noop_with_empty_axes; bfloat16).
// Canonical: the opset-13 input form.
#include "ops/reduction/Reduce.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineReduceSum() {
  OpDef d;
  d.name = "ReduceSum";
  reduceAttrForm(d, 1, kReduceTypes);
  reduceAttrForm(d, 11, kReduceTypes);
  reduceInputForm(d, 13).type("T", kReduceTypes | bit(ir::DType::kBFloat16));
  d.normalize = reduceNormalizer(13);
  d.infer = inferReduce;
  // dX = dY broadcast back over the reduced axes.
  d.gradient = [](GradientContext &ctx) -> Status {
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, broadcastReduceGrad(ctx, ctx.outputGrad(0)));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // One add per input element.
  d.cost = reductionCost();
  d.sharding = reduceSharding();
  return d;
}

} // namespace dtc::ops
