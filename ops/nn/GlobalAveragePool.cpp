// GlobalAveragePool: mean over all spatial axes, X [N, C, D1..Dn] -> [N, C, 1..1]
// (onnx/docs/Operators.md#GlobalAveragePool). One form since opset 1.
#include "ops/OpDef.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Gradient of Y = mean over the spatial axes of X: dX = Expand(dY * (1 / S), shape(X)) with S
/// the number of spatial elements.
Status globalAveragePoolGradient(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy || !ctx.needsGrad(0))
    return Status::ok();
  const ir::Shape &x = ctx.input(0)->shape();
  if (!x.isStatic() || x.rank() < 3)
    return ctx.error("gradient: X must have a static shape of rank >= 3, got " + x.str());
  std::vector<int64_t> xs = x.staticSizes();
  int64_t spatial = 1;
  for (size_t i = 2; i < xs.size(); ++i)
    spatial *= xs[i];
  ir::Value *scaled = dy;
  if (spatial != 1) {
    DTC_ASSIGN_OR_RETURN(
        scaled, ctx.emit1("Mul", {dy, ctx.constantF32(1.0f / static_cast<float>(spatial))}));
  }
  DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("Expand", {scaled, ctx.constantI64s(xs)}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace

OpDef defineGlobalAveragePool() {
  OpDef d;
  d.name = "GlobalAveragePool";
  d.version(1).in("X", "T").out("Y", "T").type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &x = ctx.inputShape(0);
    if (!x.hasRank()) {
      ctx.setOutputShape(0, x);
      return Status::ok();
    }
    if (x.rank() < 3)
      return ctx.error("X must have rank >= 3 (N, C, spatial...), got " + x.str());
    std::vector<ir::Dim> dims = {x[0], x[1]};
    dims.resize(x.rank(), ir::Dim::fixed(1));
    ctx.setOutputShape(0, ir::Shape(std::move(dims)));
    return Status::ok();
  };
  d.gradient = globalAveragePoolGradient;
  // One add per input element (the last one of each window is the divide).
  d.cost = reductionCost();
  d.sharding = poolingSharding();
  return d;
}

} // namespace dtc::ops
