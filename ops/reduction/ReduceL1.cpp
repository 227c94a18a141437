// ReduceL1: sum of absolute values over the given axes. ONNX ReduceL1-1/11 (axes attribute;
// 11 allows negative axes), -13 (bfloat16), -18 (axes become an optional int64 input, plus
// noop_with_empty_axes). Canonical: the opset-18 input form. Folds.
#include "ops/reduction/Reduce.h"

#include <cmath>

namespace dtc::ops {

OpDef defineReduceL1() {
  OpDef d = reduceDef("ReduceL1");
  d.fold = [](FoldContext &ctx) {
    return foldReduce(ctx, {0.0, [](double a, double x) { return a + std::fabs(x); },
                            [](double a, int64_t) { return a; }});
  };
  // dX = dY * Sign(X): 0 at X = 0, as PyTorch's norm(p=1) backward.
  d.gradient = [](GradientContext &ctx) {
    return reduceLocalGradient(
        ctx, [&](ir::Value *x, ir::Value *) { return ctx.emit1("Sign", {x}); }, false);
  };
  // An absolute value and an add per input element.
  d.cost = reductionCost(2);
  return d;
}

} // namespace dtc::ops
