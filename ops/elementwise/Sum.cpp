// Sum: elementwise sum of one or more float tensors with multidirectional broadcasting (ONNX
// Sum-6 same-shape, Sum-8 broadcasting, Sum-13 bfloat16; one canonical form). Added left to
// right, as onnxruntime and the ONNX reference. Folds.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineSum() {
  OpDef d = variadicDef("Sum", "sum", /*integerTypes=*/false);
  d.fold = [](FoldContext &ctx) {
    return foldVariadic(
        ctx, [](int64_t a, int64_t b) -> Expected<int64_t> { return a + b; },
        [](double a, double b) { return a + b; });
  };
  // dx_i = dY summed down to x_i's shape (broadcasting undone), for every input.
  d.gradient = [](GradientContext &ctx) -> Status {
    for (size_t i = 0; i < ctx.node().numInputs(); ++i) {
      if (!ctx.needsGrad(i))
        continue;
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(ctx.outputGrad(0), ctx.input(i)->shape()));
      ctx.setInputGrad(i, g);
    }
    return Status::ok();
  };
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
