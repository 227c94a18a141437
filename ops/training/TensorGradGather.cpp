// ai.dtc.GatherGrad: the gradient of Gather with respect to its data, a zero tensor of the data's
// shape into which dY is scatter-added (repeated indices accumulate, as in PyTorch's
// embedding/index_select backward). Made by the rule in ops/tensor/Gather.cpp; CPU kernel in
// ops/cpu/TensorGradIndex.cpp.
#include "ops/tensor/TensorCommon.h"

namespace dtc::ops {

/// Inputs dy (shape data[:axis] + indices.shape + data[axis+1:]) and indices (int32/int64,
/// negative ones count from the back). Attributes `axis` (in [-r, r)) and `shape` (the data's
/// dims, rank r >= 1). Output dx of `shape`:
///   dx[o, i, k] = sum over j with indices[j] (normalized) == i of dy[o, j, k].
/// Indices out of range are a run-time error naming the node.
OpDef defineGatherGrad() {
  OpDef d;
  d.name = "GatherGrad";
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
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.attrInt("axis", 0), rank, n.where()));
    const ir::Shape &dy = ctx.inputShape(0), &idx = ctx.inputShape(1);
    if (dy.hasRank() && idx.hasRank() && dy.rank() != shape.size() - 1 + idx.rank())
      return ctx.error("dy " + dy.str() + " must have rank " +
                       std::to_string(shape.size() - 1 + idx.rank()) + " for indices " + idx.str() +
                       " and data " + intsText(shape) + " along axis " + std::to_string(axis));
    ctx.setOutputShape(0, ir::Shape::ofStatic(shape));
    return Status::ok();
  };
  // dx is zero-filled, then one add per dy element (scatter-add).
  d.cost = reductionCost();
  return d;
}

} // namespace dtc::ops
