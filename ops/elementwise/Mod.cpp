// Mod: elementwise remainder with broadcasting (ONNX Mod-10; Mod-13 adds bfloat16). fmod = 0
// (default, integers only): the remainder has the divisor's sign, as Python's % and numpy.mod;
// fmod = 1: the dividend's sign, as C's fmod (required for float types; an error naming the
// node otherwise). Folds (an integer division by zero is not folded).
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

namespace {

Expected<int64_t> intMod(int64_t a, int64_t b, bool fmod) {
  if (b == 0)
    return Status::error("integer division by zero in Mod");
  if (b == -1)
    return int64_t{0}; // INT64_MIN % -1 overflows in C++
  int64_t r = a % b;
  if (!fmod && r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

} // namespace

OpDef defineMod() {
  OpDef d;
  d.name = "Mod";
  d.version(10)
      .in("A", "T")
      .in("B", "T")
      .out("C", "T")
      .attr("fmod", ir::AttrKind::kInt)
      .type("T", kNumericTypes & ~bit(ir::DType::kBFloat16));
  d.version(13).type("T", kNumericTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    if (ir::isFloat(ctx.inputDType(0)) && ctx.node().attrInt("fmod", 0) == 0)
      return ctx.error("fmod must be 1 for float inputs (got " +
                       std::string(ir::dtypeName(ctx.inputDType(0))) + " with fmod = 0)");
    return inferBroadcast(ctx);
  };
  d.fold = [](FoldContext &ctx) {
    const bool fmod = ctx.node().attrInt("fmod", 0) != 0;
    return foldBinary(
        ctx, [fmod](int64_t a, int64_t b) { return intMod(a, b, fmod); },
        [](double a, double b) { return std::fmod(a, b); });
  };
  // C = A - B * q with q = trunc(A / B) (fmod = 1) held constant almost everywhere:
  // dA = dC, dB = -dC * q = -dC * (A - C) / B (PyTorch's fmod backward), each summed down to its
  // input's shape. f32 only.
  d.gradient = [](GradientContext &ctx) -> Status {
    ir::Value *dc = ctx.outputGrad(0);
    if (dc->dtype() != ir::DType::kFloat32)
      return ctx.error("gradient: Mod's gradient rule supports f32 (got " +
                       std::string(ir::dtypeName(dc->dtype())) + ")");
    if (ctx.needsGrad(0)) {
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(dc, ctx.input(0)->shape()));
      ctx.setInputGrad(0, g);
    }
    if (ctx.needsGrad(1)) {
      DTC_ASSIGN_OR_RETURN(ir::Value * diff, ctx.emit1("Sub", {ctx.input(0), ctx.output(0)}));
      DTC_ASSIGN_OR_RETURN(ir::Value * q, ctx.emit1("Div", {diff, ctx.input(1)}));
      DTC_ASSIGN_OR_RETURN(ir::Value * prod, ctx.emit1("Mul", {dc, q}));
      DTC_ASSIGN_OR_RETURN(ir::Value * neg, ctx.emit1("Neg", {prod}));
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(neg, ctx.input(1)->shape()));
      ctx.setInputGrad(1, g);
    }
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
