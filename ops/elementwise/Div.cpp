// Div: elementwise division (integer division truncates toward zero, as in C) with ONNX
// multidirectional broadcasting (opset 7 on; later versions only widen the type set). Folds on
// int64 and float constants.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <climits>
#include <cmath>

namespace dtc::ops {

OpDef defineDiv() {
  OpDef d;
  d.name = "Div";
  d.version(7).in("A", "T").in("B", "T").out("C", "T").type("T", kNumericTypes);
  d.infer = inferBroadcast;
  d.fold = [](FoldContext &ctx) {
    return foldBinary(
        ctx,
        [](int64_t a, int64_t b) -> Expected<int64_t> {
          if (b == 0)
            return Status::error("integer division by zero");
          if (a == INT64_MIN && b == -1)
            return Status::error("int64 overflow in Div");
          return a / b;
        },
        [](double a, double b) { return a / b; });
  };
  // C = A / B: dA = dC / B, dB = -dC * A / B^2 = -(dC / B) * C (PyTorch's div backward up to
  // rounding), each summed down to its input's shape; the negation runs after the sum.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0) && !ctx.needsGrad(1))
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(ir::Value * t, ctx.emit1("Div", {ctx.outputGrad(0), ctx.input(1)}));
    if (ctx.needsGrad(0)) {
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(t, ctx.input(0)->shape()));
      ctx.setInputGrad(0, g);
    }
    if (ctx.needsGrad(1)) {
      DTC_ASSIGN_OR_RETURN(ir::Value * tc, ctx.emit1("Mul", {t, ctx.output(0)}));
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(tc, ctx.input(1)->shape()));
      DTC_ASSIGN_OR_RETURN(g, ctx.emit1("Neg", {g}));
      ctx.setInputGrad(1, g);
    }
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
