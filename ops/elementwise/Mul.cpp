// Mul: elementwise multiplication with ONNX multidirectional broadcasting (opset 7 on; later versions
// only widen the type set). Folds on int64 and float constants.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineMul() {
  OpDef d;
  d.name = "Mul";
  d.version(7).in("A", "T").in("B", "T").out("C", "T").type("T", kNumericTypes);
  d.infer = inferBroadcast;
  d.fold = [](FoldContext &ctx) {
    return foldBinary(
        ctx, [](int64_t a, int64_t b) -> Expected<int64_t> { int64_t r; if (__builtin_mul_overflow(a, b, &r)) return Status::error("int64 overflow in Mul"); return r; },
        [](double a, double b) { return a * b; });
  };
  // d(A*B)/dA = dC * B, d(A*B)/dB = dC * A, each summed down to its input's shape.
  d.gradient = [](GradientContext &ctx) -> Status {
    ir::Value *dc = ctx.outputGrad(0);
    for (size_t i = 0; i < 2; ++i) {
      if (!ctx.needsGrad(i))
        continue;
      DTC_ASSIGN_OR_RETURN(ir::Value * full, ctx.emit1("Mul", {dc, ctx.input(1 - i)}));
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(full, ctx.input(i)->shape()));
      ctx.setInputGrad(i, g);
    }
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
