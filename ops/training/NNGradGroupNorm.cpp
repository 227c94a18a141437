// ai.dtc.GroupNormGrad: the backward of GroupNormalization and InstanceNormalization (one group
// per channel), ops/nn/NormCommon.h.
#include "ops/OpDef.h"
#include "ops/nn/NormCommon.h"

namespace dtc::ops {

namespace {

Status inferGroupNormGrad(InferenceContext &ctx) {
  const ir::Shape &dy = ctx.inputShape(0);
  const ir::Shape &x = ctx.inputShape(1);
  if (dy.hasRank() && x.hasRank() && dy != x)
    return ctx.error("dY " + dy.str() + " and X " + x.str() + " differ");
  if (x.hasRank() && x.rank() < 2)
    return ctx.error("X must have rank >= 2 (N, C, D1, ..., Dn), got " + x.str());
  const int64_t groups = ctx.node().attrInt("num_groups", 0);
  if (groups <= 0)
    return ctx.error("num_groups must be >= 1, got " + std::to_string(groups));
  ir::Dim c = x.hasRank() ? x[1] : ir::Dim::unknown();
  if (c.isStatic() && c.value() % groups != 0)
    return ctx.error("the channel count " + std::to_string(c.value()) +
                     " is not a multiple of num_groups " + std::to_string(groups));
  const ir::Shape &s = ctx.inputShape(2);
  if (s.hasRank() && (s.rank() != 1 || (s[0].isStatic() && c.isStatic() && s[0] != c)))
    return ctx.error("scale " + s.str() + " must be [C] with C = " + c.str());
  ctx.setOutputShape(0, x);
  for (size_t i = 1; i < ctx.node().numOutputs(); ++i)
    if (ctx.node().output(i))
      ctx.setOutputShape(i, ir::Shape({c}));
  return Status::ok();
}

} // namespace

// GroupNormGrad (ai.dtc): dY, X (N, C, D1..Dn), scale [C] -> dX, dscale [C], dbias [C] (both
// optional). Per (sample, group) of m = (C / num_groups) * D1*..*Dn elements, with
// xhat = (X - mean) * inv_std and g = dY * scale[c]:
// dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)); dscale[c] = sum over samples and
// spatial elements of dY * xhat; dbias[c] = sum of dY (the layer-norm backward over each group,
// Wu & He 2018; PyTorch's native_group_norm_backward). Statistics are recomputed from X.
OpDef defineGroupNormGrad() {
  OpDef d;
  d.name = "GroupNormGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .in("X", "T")
      .in("scale", "T")
      .out("dX", "T")
      .optOut("dscale", "T")
      .optOut("dbias", "T")
      .attr("num_groups", ir::AttrKind::kInt, /*required=*/true)
      .attr("epsilon", ir::AttrKind::kFloat)
      .type("T", kFloatTypes);
  d.infer = inferGroupNormGrad;
  // Per element of X: 4 to recompute the statistics, 2 for xhat, 1 for g, 4 for the two group
  // sums, 4 for dX, 2 for dscale and 1 for dbias; per group 7.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    const std::vector<int64_t> &x = ctx.inputDims(1);
    if (x.size() < 2)
      return ctx.error("X must have rank >= 2");
    const double groups = static_cast<double>(x[0]) * ctx.node().attrInt("num_groups", 1);
    return ctx.withFlops(18 * ctx.inputElements(1) + 7 * groups);
  };
  return d;
}

} // namespace dtc::ops
