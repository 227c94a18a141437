// ReduceLogSumExp: log(sum(exp(x))) over the given axes. ONNX ReduceLogSumExp-1/11 (axes
// attribute; 11 allows negative axes), -13 (bfloat16), -18 (axes become an optional int64 input,
// plus noop_with_empty_axes). Canonical: the opset-18 input form. Folds.
#include "ops/reduction/Reduce.h"

#include <cmath>

namespace dtc::ops {

OpDef defineReduceLogSumExp() {
  OpDef d = reduceDef("ReduceLogSumExp");
  d.fold = [](FoldContext &ctx) {
    return foldReduce(ctx, {0.0, [](double a, double x) { return a + std::exp(x); },
                            [](double a, int64_t) { return std::log(a); }});
  };
  // dX = dY * exp(X - Y): the softmax of the slice.
  d.gradient = [](GradientContext &ctx) {
    return reduceLocalGradient(ctx, [&](ir::Value *x, ir::Value *y) -> Expected<ir::Value *> {
      DTC_ASSIGN_OR_RETURN(ir::Value * shifted, ctx.emit1("Sub", {x, y}));
      return ctx.emit1("Exp", {shifted});
    });
  };
  // A subtraction, an exponential and an add per input element; a log per output element.
  d.cost = reductionCost(3, 1);
  return d;
}

} // namespace dtc::ops
