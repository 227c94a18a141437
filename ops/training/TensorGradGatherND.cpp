// ai.dtc.GatherNDGrad: the gradient of GatherND with respect to its data, a zero tensor of the
// data's shape into which each dY slice is added at its index tuple (repeated tuples accumulate,
// as PyTorch's index_put with accumulate=True). Made by the rule in ops/tensor/GatherND.cpp; CPU
// kernel in ops/cpu/TensorGradIndex.cpp.
#include "ops/tensor/TensorCommon.h"

namespace dtc::ops {

/// Inputs dy (GatherND's output shape) and indices (int64); attributes `batch_dims` and `shape`
/// (the data's dims). Output dx of `shape`. Indices out of range are a run-time error naming
/// the node.
OpDef defineGatherNDGrad() {
  OpDef d;
  d.name = "GatherNDGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dy", "T")
      .in("indices", "Tind")
      .out("dx", "T")
      .attr("batch_dims", ir::AttrKind::kInt)
      .attr("shape", ir::AttrKind::kInts, true)
      .type("T", kFloatTypes)
      .type("Tind", kInt64Type);
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::vector<int64_t> shape = ctx.node().attrInts("shape");
    if (shape.empty())
      return ctx.error("attribute 'shape' must have rank >= 1");
    for (int64_t s : shape)
      if (s < 0)
        return ctx.error("attribute 'shape' " + intsText(shape) + " has a negative dim");
    const ir::Shape &idx = ctx.inputShape(1), &dy = ctx.inputShape(0);
    const int64_t b = ctx.node().attrInt("batch_dims", 0);
    if (idx.isStatic() && dy.isStatic()) {
      const std::vector<int64_t> id = idx.staticSizes();
      const int64_t r = static_cast<int64_t>(shape.size());
      if (id.empty() || b < 0 || b >= std::min<int64_t>(r, static_cast<int64_t>(id.size())) ||
          id.back() < 1 || id.back() > r - b)
        return ctx.error("indices " + idx.str() + " and batch_dims " + std::to_string(b) +
                         " do not index data " + intsText(shape));
      std::vector<int64_t> want(id.begin(), id.end() - 1);
      want.insert(want.end(), shape.begin() + b + id.back(), shape.end());
      if (dy.staticSizes() != want)
        return ctx.error("dy " + dy.str() + " must have shape " + intsText(want));
    }
    ctx.setOutputShape(0, ir::Shape::ofStatic(shape));
    return Status::ok();
  };
  // dx is zero-filled, then one add per dy element (scatter-add).
  d.cost = reductionCost();
  return d;
}

} // namespace dtc::ops
