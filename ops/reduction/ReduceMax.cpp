// ReduceMax: maximum over the given axes. ONNX ReduceMax-1/11 (axes attribute; 11 allows
// negative axes), -12 (int8, uint8), -13 (bfloat16), -18 (axes become an optional int64 input,
// plus noop_with_empty_axes), -20 (bool). Canonical: the opset-20 input form.
#include "ops/reduction/Reduce.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineReduceMax() {
  OpDef d;
  d.name = "ReduceMax";
  const TypeMask t12 = kReduceTypes | bit(ir::DType::kInt8) | bit(ir::DType::kUInt8);
  reduceAttrForm(d, 1, kReduceTypes);
  reduceAttrForm(d, 11, kReduceTypes);
  reduceAttrForm(d, 12, t12);
  reduceAttrForm(d, 13, t12 | bit(ir::DType::kBFloat16));
  reduceInputForm(d, 18);
  d.version(20).type("T", t12 | bit(ir::DType::kBFloat16) | kBoolType);
  d.normalize = reduceNormalizer(18);
  d.infer = inferReduce;
  // Ties: the gradient is split evenly among the elements equal to the maximum, as PyTorch's
  // amax backward does (torch.amax is what exporters turn into ReduceMax):
  //   mask = Cast(Equal(X, Y), float), dX = mask * dY / ReduceSum(mask)   (over the axes)
  // (this overrides the first-maximal-element default of ops/Gradient.h for ReduceMax). A NaN
  // maximum equals nothing: count 0, and the slice's gradient is NaN, as in PyTorch.
  d.gradient = [](GradientContext &ctx) -> Status {
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reducedAxes(ctx));
    if (axes.empty()) { // noop_with_empty_axes: Y = X
      ctx.setInputGrad(0, ctx.outputGrad(0));
      return Status::ok();
    }
    std::vector<int64_t> kept = ctx.input(0)->shape().staticSizes();
    for (int64_t a : axes)
      kept[static_cast<size_t>(a)] = 1;
    DTC_ASSIGN_OR_RETURN(ir::Value * y, ctx.reshapeTo(ctx.output(0), kept));
    DTC_ASSIGN_OR_RETURN(ir::Value * dy, ctx.reshapeTo(ctx.outputGrad(0), kept));
    DTC_ASSIGN_OR_RETURN(ir::Value * eq, ctx.emit1("Equal", {ctx.input(0), y}));
    DTC_ASSIGN_OR_RETURN(
        ir::Value * mask,
        ctx.emit1("Cast", {eq}, {{"to", ir::Attribute(static_cast<int64_t>(1))}})); // FLOAT
    DTC_ASSIGN_OR_RETURN(ir::Value * count,
                         ctx.emit1("ReduceSum", {mask, ctx.constantI64s(axes)},
                                   {{"keepdims", ir::Attribute(int64_t{1})},
                                    {"noop_with_empty_axes", ir::Attribute(int64_t{0})}}));
    DTC_ASSIGN_OR_RETURN(ir::Value * share, ctx.emit1("Div", {dy, count}));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("Mul", {mask, share}));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // One comparison per input element.
  d.cost = reductionCost();
  d.sharding = reduceSharding();
  return d;
}

} // namespace dtc::ops
