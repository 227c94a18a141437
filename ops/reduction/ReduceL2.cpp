// ReduceL2: sqrt of the sum of squares over the given axes. ONNX ReduceL2-1/11 (axes
// attribute; 11 allows negative axes), -13 (bfloat16), -18 (axes become an optional int64 input,
// plus noop_with_empty_axes). Canonical: the opset-18 input form. Folds.
#include "ops/reduction/Reduce.h"

#include <cmath>

namespace dtc::ops {

OpDef defineReduceL2() {
  OpDef d = reduceDef("ReduceL2");
  d.fold = [](FoldContext &ctx) {
    return foldReduce(ctx, {0.0, [](double a, double x) { return a + x * x; },
                            [](double a, int64_t) { return std::sqrt(a); }});
  };
  // dX = dY * X / Y, and 0 where the norm Y is 0 (PyTorch's norm backward masks 0/0 to 0).
  d.gradient = [](GradientContext &ctx) {
    return reduceLocalGradient(
        ctx,
        [&](ir::Value *x, ir::Value *y) -> Expected<ir::Value *> {
          ir::Value *zero = ctx.constantF32(0.f);
          DTC_ASSIGN_OR_RETURN(ir::Value * isZero, ctx.emit1("Equal", {y, zero}));
          DTC_ASSIGN_OR_RETURN(ir::Value * q, ctx.emit1("Div", {x, y}));
          return ctx.emit1("Where", {isZero, zero, q});
        },
        /*noopIsIdentity=*/false);
  };
  // A multiply and an add per input element, a square root per output element.
  d.cost = reductionCost(2, 1);
  return d;
}

} // namespace dtc::ops
