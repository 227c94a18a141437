// ReduceSumSquare: sum of squares over the given axes. ONNX ReduceSumSquare-1/11 (axes
// attribute; 11 allows negative axes), -13 (bfloat16), -18 (axes become an optional int64 input,
// plus noop_with_empty_axes). Canonical: the opset-18 input form. Folds.
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineReduceSumSquare() {
  OpDef d = reduceDef("ReduceSumSquare");
  d.fold = [](FoldContext &ctx) {
    return foldReduce(ctx, {0.0, [](double a, double x) { return a + x * x; },
                            [](double a, int64_t) { return a; }});
  };
  // dX = 2 X dY.
  d.gradient = [](GradientContext &ctx) {
    return reduceLocalGradient(
        ctx,
        [&](ir::Value *x, ir::Value *) {
          return ctx.emit1("Mul", {x, ctx.constantF32(2.f)});
        },
        /*noopIsIdentity=*/false);
  };
  // A multiply and an add per input element.
  d.cost = reductionCost(2);
  return d;
}

} // namespace dtc::ops
