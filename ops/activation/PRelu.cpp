// PRelu: elementwise x < 0 ? slope * x : x, with slope broadcast unidirectionally to X (ONNX
// PRelu-7 float types, PRelu-9 adds int32/int64/uint32/uint64, PRelu-16 bfloat16; one canonical
// form). Y has X's shape. Folds. Gradient for X and slope (f32), composed of ONNX ops.
#include "ops/Sharding.h"
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

namespace {

constexpr TypeMask kPReluIntTypes = bit(ir::DType::kInt32) | bit(ir::DType::kInt64) |
                                    bit(ir::DType::kUInt32) | bit(ir::DType::kUInt64);

/// Y = X's shape; slope must broadcast to X unidirectionally (onnx/docs/Broadcasting.md: rank
/// at most X's, each trailing-aligned dim 1 or equal).
Status inferPRelu(InferenceContext &ctx) {
  const ir::Shape &x = ctx.inputShape(0), &s = ctx.inputShape(1);
  if (x.hasRank() && s.hasRank()) {
    bool ok = s.rank() <= x.rank();
    for (size_t i = 0; ok && i < s.rank(); ++i) {
      const ir::Dim &sd = s[i], &xd = x[x.rank() - s.rank() + i];
      ok = !(sd.isStatic() && sd.value() != 1 && xd.isStatic() && xd.value() != sd.value());
    }
    if (!ok)
      return ctx.error("slope " + s.str() + " cannot be broadcast to X " + x.str() +
                       " (unidirectional broadcasting)");
  }
  ctx.setOutputShape(0, x);
  return Status::ok();
}

/// dX = Where(X > 0, dY, dY * slope); dslope = sumToShape(dY * Min(X, 0), slope's shape): at
/// X = 0 dX is slope * dY and dslope gets 0, as PyTorch's prelu backward (x > 0 ? dY : w dY).
/// The ReduceSum of sumToShape undoes the broadcast of slope.
Status preluGradient(GradientContext &ctx) {
  if (!ctx.needsGrad(0) && !ctx.needsGrad(1))
    return Status::ok();
  if (ctx.input(0)->dtype() != ir::DType::kFloat32)
    return ctx.error("the PRelu gradient supports f32 only");
  ir::Value *dy = ctx.outputGrad(0), *x = ctx.input(0), *slope = ctx.input(1);
  ir::Value *zero = ctx.constantF32(0.f);
  if (ctx.needsGrad(0)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * positive, ctx.emit1("Greater", {x, zero}));
    DTC_ASSIGN_OR_RETURN(ir::Value * scaled, ctx.emit1("Mul", {dy, slope}));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("Where", {positive, dy, scaled}));
    ctx.setInputGrad(0, dx);
  }
  if (ctx.needsGrad(1)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * negative, ctx.emit1("Min", {x, zero}));
    DTC_ASSIGN_OR_RETURN(ir::Value * full, ctx.emit1("Mul", {dy, negative}));
    DTC_ASSIGN_OR_RETURN(ir::Value * ds, ctx.sumToShape(full, slope->shape()));
    ctx.setInputGrad(1, ds);
  }
  return Status::ok();
}

} // namespace

OpDef definePRelu() {
  OpDef d;
  d.name = "PRelu";
  d.version(7).in("X", "T").in("slope", "T").out("Y", "T").type("T", kFloatNoBf16Types);
  d.version(9).type("T", kFloatNoBf16Types | kPReluIntTypes);
  d.version(16).type("T", kFloatTypes | kPReluIntTypes);
  d.infer = inferPRelu;
  d.fold = [](FoldContext &ctx) {
    return foldBinary(
        ctx, [](int64_t x, int64_t s) -> Expected<int64_t> { return x < 0 ? s * x : x; },
        [](double x, double s) { return x < 0 ? s * x : x; });
  };
  d.gradient = preluGradient;
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
