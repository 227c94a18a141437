// Mean: elementwise mean of one or more float tensors with multidirectional broadcasting (ONNX
// Mean-6 same-shape, Mean-8 broadcasting, Mean-13 bfloat16; one canonical form): the left-to-
// right sum divided by the number of inputs, as the ONNX reference. Folds.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineMean() {
  OpDef d = variadicDef("Mean", "mean", /*integerTypes=*/false);
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    DTC_ASSIGN_OR_RETURN(std::vector<ir::TensorDataPtr> sum,
                         foldVariadic(
                             ctx, [](int64_t a, int64_t b) -> Expected<int64_t> { return a + b; },
                             [](double a, double b) { return a + b; }));
    DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(*sum[0]));
    for (double &x : v)
      x /= static_cast<double>(ctx.numInputs());
    return std::vector<ir::TensorDataPtr>{
        makeTensor(ctx.node().output(0)->name(), sum[0]->dtype(), sum[0]->dims(), v)};
  };
  // dx_i = (dY / n) summed down to x_i's shape, for every input.
  d.gradient = [](GradientContext &ctx) -> Status {
    ir::Value *dy = ctx.outputGrad(0);
    if (dy->dtype() != ir::DType::kFloat32)
      return ctx.error("gradient: Mean's gradient rule supports f32 (got " +
                       std::string(ir::dtypeName(dy->dtype())) + ")");
    const size_t n = ctx.node().numInputs();
    ir::Value *share = dy;
    if (n > 1) {
      DTC_ASSIGN_OR_RETURN(share,
                           ctx.emit1("Mul", {dy, ctx.constantF32(1.f / static_cast<float>(n))}));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!ctx.needsGrad(i))
        continue;
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(share, ctx.input(i)->shape()));
      ctx.setInputGrad(i, g);
    }
    return Status::ok();
  };
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
