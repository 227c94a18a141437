// ai.dtc.SliceGrad: the gradient of Slice with steps other than 1 (Slice's rule uses Pad for
// step-1 slices): dY scattered back into a zero tensor of the input's shape. Made by the rule
// in ops/tensor/Slice.cpp; CPU kernel in ops/cpu/TensorGradIndex.cpp.
#include "ops/tensor/TensorCommon.h"

namespace dtc::ops {

/// Input dy (the Slice output's gradient, shape (c0, ..., c_{r-1})). Attributes, one entry per
/// axis of the forward input (every axis, resolved by ONNX Slice-13 clamping, clampSlice in
/// ops/ShapeHelpers.h): `shape` (the input's dims d_a), `starts` (the first index taken) and
/// `steps` (non-zero; negative walks backwards). Output dx of `shape`:
///   dx[s_0 + k_0 * t_0, ..., s_{r-1} + k_{r-1} * t_{r-1}] = dy[k_0, ..., k_{r-1}], 0 elsewhere.
/// Errors: lengths differ from the rank, step 0, or a taken index outside [0, d_a).
OpDef defineSliceGrad() {
  OpDef d;
  d.name = "SliceGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dy", "T")
      .out("dx", "T")
      .attr("shape", ir::AttrKind::kInts, true)
      .attr("starts", ir::AttrKind::kInts, true)
      .attr("steps", ir::AttrKind::kInts, true)
      .type("T", kFloatTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const std::vector<int64_t> shape = n.attrInts("shape"), starts = n.attrInts("starts"),
                               steps = n.attrInts("steps");
    if (starts.size() != shape.size() || steps.size() != shape.size())
      return ctx.error("attributes shape " + intsText(shape) + ", starts " + intsText(starts) +
                       " and steps " + intsText(steps) + " must have one entry per axis");
    const ir::Shape &dy = ctx.inputShape(0);
    if (dy.hasRank() && dy.rank() != shape.size())
      return ctx.error("dy " + dy.str() + " must have rank " + std::to_string(shape.size()));
    for (size_t a = 0; a < shape.size(); ++a) {
      if (shape[a] < 0 || steps[a] == 0)
        return ctx.error("axis " + std::to_string(a) + ": dim " + std::to_string(shape[a]) +
                         " and step " + std::to_string(steps[a]) + " are invalid");
      if (!dy.hasRank() || !dy[a].isStatic() || dy[a].value() == 0)
        continue;
      const int64_t last = starts[a] + (dy[a].value() - 1) * steps[a];
      if (starts[a] < 0 || starts[a] >= shape[a] || last < 0 || last >= shape[a])
        return ctx.error("axis " + std::to_string(a) + ": " + dy[a].str() + " elements from " +
                         std::to_string(starts[a]) + " by step " + std::to_string(steps[a]) +
                         " do not fit in dim " + std::to_string(shape[a]));
    }
    ctx.setOutputShape(0, ir::Shape::ofStatic(shape));
    return Status::ok();
  };
  // Zero-fills dx and copies dy into the slice: 0 FLOPs.
  d.cost = dataMovementCost();
  return d;
}

} // namespace dtc::ops
