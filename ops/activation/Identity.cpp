// Identity: output = input (ONNX Identity-1; later versions only widen the type set to
// bfloat16, sequences, optionals and 8/4-bit types). Folds on any constant.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineIdentity() {
  OpDef d;
  d.name = "Identity";
  d.version(1)
      .in("input", "T")
      .out("output", "T")
      .type("T", kAllTypes & ~bit(ir::DType::kBFloat16));
  d.version(13).type("T", kAllTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    ctx.setOutputShape(0, ctx.inputShape(0));
    // Identity passes shape values through (Shape -> Identity -> Reshape chains).
    if (const std::vector<ir::Dim> *sv = ctx.shapeValue(0))
      ctx.setShapeValue(0, *sv);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &in = *ctx.input(0);
    DTC_ASSIGN_OR_RETURN(const std::string *bytes, in.bytes());
    return std::vector<ir::TensorDataPtr>{
        ir::TensorData::fromBytes(ctx.node().output(0)->name(), in.dtype(), in.dims(), *bytes)};
  };
  // dX = dY (no backward node).
  d.gradient = [](GradientContext &ctx) -> Status {
    if (ctx.needsGrad(0))
      ctx.setInputGrad(0, ctx.outputGrad(0));
    return Status::ok();
  };
  d.cost = viewCost();
  d.sharding = unarySharding();
  return d;
}

} // namespace dtc::ops
