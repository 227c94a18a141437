// Add: elementwise addition with ONNX multidirectional broadcasting (opset 7 on; later versions
// only widen the type set). Folds on int64 and float constants.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineAdd() {
  OpDef d;
  d.name = "Add";
  d.version(7).in("A", "T").in("B", "T").out("C", "T").type("T", kNumericTypes);
  d.infer = inferBroadcast;
  d.fold = [](FoldContext &ctx) {
    return foldBinary(
        ctx,
        [](int64_t a, int64_t b) -> Expected<int64_t> {
          int64_t r;
          if (__builtin_add_overflow(a, b, &r))
            return Status::error("int64 overflow in Add");
          return r;
        },
        [](double a, double b) { return a + b; });
  };
  // dA = dC, dB = dC, each summed down to its input's shape (broadcasting undone).
  d.gradient = [](GradientContext &ctx) -> Status {
    for (size_t i = 0; i < 2; ++i) {
      if (!ctx.needsGrad(i))
        continue;
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(ctx.outputGrad(0), ctx.input(i)->shape()));
      ctx.setInputGrad(i, g);
    }
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
