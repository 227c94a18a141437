// CastLike: converts input 0 to the element type of input 1 (`target_type`, whose values are not
// read) as Cast does (ONNX CastLike-15; CastLike-19 adds `saturate`, which only acts on float8
// targets dtc does not have; CastLike-21/23 add 4-bit and float8 types). Folds when both inputs
// are constant; the CPU kernel is Cast's.
#include "ops/activation/Activation.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineCastLike() {
  OpDef d;
  d.name = "CastLike";
  d.version(15)
      .in("input", "T1")
      .in("target_type", "T2")
      .out("output", "T2")
      .type("T1", kAllTypes)
      .type("T2", kAllTypes);
  d.version(19).attr("saturate", ir::AttrKind::kInt);
  d.version(21);
  // The output dtype comes from T2 (bound to target_type's dtype); the shape is input 0's.
  d.infer = [](InferenceContext &ctx) -> Status {
    ctx.setOutputShape(0, ctx.inputShape(0));
    if (ir::isInteger(ctx.inputDType(1)) && ir::isInteger(ctx.inputDType(0)))
      if (const std::vector<ir::Dim> *sv = ctx.shapeValue(0))
        ctx.setShapeValue(0, *sv);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         castTensor(*ctx.input(0), ctx.input(1)->dtype(),
                                    ctx.node().output(0)->name(), ctx.node().where(), "CastLike"));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // Input 0 as Cast (castGradient). target_type only gives a dtype: its gradient is zero.
  d.gradient = [](GradientContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(castGradient(ctx));
    if (!ctx.needsGrad(1))
      return Status::ok();
    ir::Value *like = ctx.input(1);
    ir::Value *zero = ctx.constantF32(0.f, like->shape().staticSizes());
    if (like->dtype() != ir::DType::kFloat32) {
      DTC_ASSIGN_OR_RETURN(
          zero,
          ctx.emit1("Cast", {zero}, {{"to", ir::Attribute(static_cast<int64_t>(like->dtype()))}}));
    }
    ctx.setInputGrad(1, zero);
    return Status::ok();
  };
  // A conversion, not arithmetic: 0 FLOPs; target_type's bytes are counted though only its
  // dtype is used (an upper bound, as for every input).
  d.cost = dataMovementCost();
  d.sharding = unarySharding();
  return d;
}

} // namespace dtc::ops
