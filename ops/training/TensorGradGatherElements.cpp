// ai.dtc.GatherElementsGrad: the gradient of GatherElements with respect to its data, a zero
// tensor of the data's shape into which each dY element is added at its index along `axis`
// (repeated indices accumulate, as torch.gather's backward, scatter_add). Made by the rule in
// ops/tensor/GatherElements.cpp; CPU kernel in ops/cpu/TensorGradIndex.cpp.
#include "ops/tensor/TensorCommon.h"

#include "ops/ShapeHelpers.h"

namespace dtc::ops {

/// Inputs dy and indices (int32/int64, negative ones count from the back) of one shape and of
/// the rank of `shape` (the data's dims, rank r >= 1); attribute `axis` in [-r, r). Output dx of
/// `shape`: dx[.., indices[p], ..] += dy[p] for every position p (the index in position axis).
/// Indices out of range are a run-time error naming the node.
OpDef defineGatherElementsGrad() {
  OpDef d;
  d.name = "GatherElementsGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dy", "T")
      .in("indices", "Tind")
      .out("dx", "T")
      .attr("axis", ir::AttrKind::kInt)
      .attr("shape", ir::AttrKind::kInts, true)
      .type("T", kFloatTypes)
      .type("Tind", kInt32Or64Types);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const std::vector<int64_t> shape = n.attrInts("shape");
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (rank == 0)
      return ctx.error("attribute 'shape' must have rank >= 1");
    for (int64_t s : shape)
      if (s < 0)
        return ctx.error("attribute 'shape' " + intsText(shape) + " has a negative dim");
    DTC_RETURN_IF_ERROR(normalizeAxis(n.attrInt("axis", 0), rank, n.where()).status());
    const ir::Shape &dy = ctx.inputShape(0), &idx = ctx.inputShape(1);
    if (dy.hasRank() && idx.hasRank() &&
        (dy.rank() != shape.size() || idx.rank() != shape.size() ||
         (dy.isStatic() && idx.isStatic() && dy.staticSizes() != idx.staticSizes())))
      return ctx.error("dy " + dy.str() + " and indices " + idx.str() +
                       " must have one shape of rank " + std::to_string(rank));
    ctx.setOutputShape(0, ir::Shape::ofStatic(shape));
    return Status::ok();
  };
  // dx is zero-filled, then one add per dy element (scatter-add).
  d.cost = reductionCost();
  return d;
}

} // namespace dtc::ops
