// GlobalAveragePool: mean over all spatial axes, X [N, C, D1..Dn] -> [N, C, 1..1]
// (onnx/docs/Operators.md#GlobalAveragePool). One form since opset 1.
#include "ops/OpDef.h"

namespace dtc::ops {

OpDef defineGlobalAveragePool() {
  OpDef d;
  d.name = "GlobalAveragePool";
  d.version(1).in("X", "T").out("Y", "T").type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &x = ctx.inputShape(0);
    if (!x.hasRank()) {
      ctx.setOutputShape(0, x);
      return Status::ok();
    }
    if (x.rank() < 3)
      return ctx.error("X must have rank >= 3 (N, C, spatial...), got " + x.str());
    std::vector<ir::Dim> dims = {x[0], x[1]};
    dims.resize(x.rank(), ir::Dim::fixed(1));
    ctx.setOutputShape(0, ir::Shape(std::move(dims)));
    return Status::ok();
  };
  return d;
}

} // namespace dtc::ops
