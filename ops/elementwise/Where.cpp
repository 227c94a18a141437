// Where: elementwise select, condition ? X : Y, with three-way broadcasting (opset 9 on).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineWhere() {
  OpDef d;
  d.name = "Where";
  d.version(9)
      .in("condition", "B")
      .in("X", "T")
      .in("Y", "T")
      .out("output", "T")
      .type("B", kBoolType)
      .type("T", kAllTypes);
  d.infer = inferBroadcast;
  // The condition gets none (bool). dX = condition ? dOut : 0 and dY = condition ? 0 : dOut:
  // the unselected branch gets exactly 0 (even where its value is inf or NaN), as PyTorch's
  // where backward; each summed down to its input's shape.
  d.gradient = [](GradientContext &ctx) -> Status {
    for (size_t i = 1; i < 3; ++i) {
      if (!ctx.needsGrad(i))
        continue;
      ir::Value *dy = ctx.outputGrad(0);
      if (dy->dtype() != ir::DType::kFloat32)
        return ctx.error("gradient: Where's gradient rule supports f32 (got " +
                         std::string(ir::dtypeName(dy->dtype())) + ")");
      ir::Value *zero = ctx.constantF32(0.f);
      std::vector<ir::Value *> ins = {ctx.input(0), i == 1 ? dy : zero, i == 1 ? zero : dy};
      DTC_ASSIGN_OR_RETURN(ir::Value * full, ctx.emit1("Where", ins));
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(full, ctx.input(i)->shape()));
      ctx.setInputGrad(i, g);
    }
    return Status::ok();
  };
  d.cost = elementwiseCost();
  return d;
}

} // namespace dtc::ops
