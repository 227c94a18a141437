// Pow: X ** Y elementwise with broadcasting. From opset 12 the exponent may have its own type
// (T1 for the base, T2 for the exponent); the output has the base's type. The gradient rule
// follows PyTorch's conventions at X == 0 and Y == 0 (see below).
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>
#include <optional>

namespace dtc::ops {

OpDef definePow() {
  OpDef d;
  d.name = "Pow";
  d.version(7).in("X", "T").in("Y", "T").out("Z", "T").type("T", kFloatTypes);
  OpVersion &v12 = d.version(12);
  v12.inputs[1].typeVar = "T1";
  v12.type("T", kNumericTypes).type("T1", kNumericTypes);
  d.infer = inferBroadcast;
  // Z = X ** Y (PyTorch's pow_backward_self / pow_backward_exponent):
  //   dX = dZ * Y * X ** (Y - 1), and 0 where Y == 0 (even at X == 0, where the formula is NaN);
  //   dY = dZ * Z * log(X), and 0 where X == 0 and Y >= 0. For X < 0 log(X) is NaN, so dY is
  //   NaN there (as in PyTorch); at X == 0 with Y < 0 it is dZ * (+inf * -inf) = -inf * dZ.
  // A constant scalar exponent c folds the rule: c = 0 gives zeros, c = 1 gives dZ, c = 2 gives
  // dZ * 2X, others dZ * c * X ** (c - 1). An integer exponent is cast to X's dtype first (it gets
  // no gradient). Both gradients are summed down to their input's shape. f32 only.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0) && !ctx.needsGrad(1))
      return Status::ok();
    ir::Value *x = ctx.input(0), *e = ctx.input(1), *z = ctx.output(0), *dz = ctx.outputGrad(0);
    if (x->dtype() != ir::DType::kFloat32)
      return ctx.error("gradient: Pow's gradient rule supports an f32 base (got " +
                       std::string(ir::dtypeName(x->dtype())) + ")");
    if (ctx.needsGrad(0)) {
      std::optional<double> c;
      if (e->isConstant() && e->initializer()->numElements() == 1)
        if (auto v = e->initializer()->toDoubles(); v && v->size() == 1)
          c = (*v)[0];
      ir::Value *full = nullptr;
      if (c && *c == 0.0) {
        ctx.setInputGrad(0, ctx.constantF32(0.f, x->shape().staticSizes()));
      } else if (c) {
        ir::Value *slope; // dZ/dX without dZ
        if (*c == 1.0) {
          slope = nullptr;
        } else if (*c == 2.0) {
          DTC_ASSIGN_OR_RETURN(slope, ctx.emit1("Mul", {x, ctx.constantF32(2.f)}));
        } else {
          DTC_ASSIGN_OR_RETURN(ir::Value * p,
                               ctx.emit1("Pow", {x, ctx.constantF32(static_cast<float>(*c - 1))}));
          DTC_ASSIGN_OR_RETURN(slope,
                               ctx.emit1("Mul", {p, ctx.constantF32(static_cast<float>(*c))}));
        }
        full = dz;
        if (slope) {
          DTC_ASSIGN_OR_RETURN(full, ctx.emit1("Mul", {dz, slope}));
        }
      } else {
        ir::Value *ef = e;
        if (e->dtype() != x->dtype()) {
          DTC_ASSIGN_OR_RETURN(
              ef,
              ctx.emit1("Cast", {e}, {{"to", ir::Attribute(static_cast<int64_t>(x->dtype()))}}));
        }
        DTC_ASSIGN_OR_RETURN(ir::Value * em1, ctx.emit1("Sub", {ef, ctx.constantF32(1.f)}));
        DTC_ASSIGN_OR_RETURN(ir::Value * p, ctx.emit1("Pow", {x, em1}));
        DTC_ASSIGN_OR_RETURN(ir::Value * slope, ctx.emit1("Mul", {ef, p}));
        DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.emit1("Mul", {dz, slope}));
        DTC_ASSIGN_OR_RETURN(ir::Value * zeroExp, ctx.emit1("Equal", {ef, ctx.constantF32(0.f)}));
        DTC_ASSIGN_OR_RETURN(full, ctx.emit1("Where", {zeroExp, ctx.constantF32(0.f), g}));
      }
      if (full) {
        DTC_ASSIGN_OR_RETURN(ir::Value * gx, ctx.sumToShape(full, x->shape()));
        ctx.setInputGrad(0, gx);
      }
    }
    if (ctx.needsGrad(1)) {
      DTC_ASSIGN_OR_RETURN(ir::Value * logx, ctx.emit1("Log", {x}));
      DTC_ASSIGN_OR_RETURN(ir::Value * zl, ctx.emit1("Mul", {z, logx}));
      DTC_ASSIGN_OR_RETURN(ir::Value * t, ctx.emit1("Mul", {dz, zl}));
      DTC_ASSIGN_OR_RETURN(ir::Value * zeroBase, ctx.emit1("Equal", {x, ctx.constantF32(0.f)}));
      DTC_ASSIGN_OR_RETURN(ir::Value * inner,
                           ctx.emit1("Where", {zeroBase, ctx.constantF32(0.f), t}));
      DTC_ASSIGN_OR_RETURN(ir::Value * negExp, ctx.emit1("Less", {e, ctx.constantF32(0.f)}));
      DTC_ASSIGN_OR_RETURN(ir::Value * full, ctx.emit1("Where", {negExp, t, inner}));
      DTC_ASSIGN_OR_RETURN(ir::Value * ge, ctx.sumToShape(full, e->shape()));
      ctx.setInputGrad(1, ge);
    }
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
