// Shared pieces of InstanceNormalization and GroupNormalization (ops/nn/NormCommon.h).
#include "ops/nn/NormCommon.h"

namespace dtc::ops::nn {

Expected<ir::Dim> inferChannelNorm(InferenceContext &ctx) {
  static const char *const kNames[] = {"X", "scale", "bias"};
  const ir::Shape &x = ctx.inputShape(0);
  if (x.hasRank() && x.rank() < 2)
    return ctx.error("X must have rank >= 2 (N, C, D1, ..., Dn), got " + x.str());
  ir::Dim c = x.hasRank() ? x[1] : ir::Dim::unknown();
  for (size_t i = 1; i < 3; ++i) {
    const ir::Shape &s = ctx.inputShape(i);
    if (!s.hasRank())
      continue;
    if (s.rank() != 1 || (s[0].isStatic() && c.isStatic() && s[0].value() != c.value()))
      return ctx.error(std::string(kNames[i]) + " " + s.str() + " must be [C] with C = " + c.str() +
                       " (X " + x.str() + ")");
    if (!c.isStatic() && s[0].isStatic())
      c = s[0];
  }
  ctx.setOutputShape(0, x);
  return c;
}

Status checkStashType(InferenceContext &ctx) {
  const int64_t stash = ctx.node().attrInt("stash_type", 1);
  for (ir::DType t :
       {ir::DType::kFloat32, ir::DType::kFloat16, ir::DType::kFloat64, ir::DType::kBFloat16})
    if (stash == static_cast<int64_t>(t))
      return Status::ok();
  return ctx.error("stash_type " + std::to_string(stash) +
                   " is not a float type (1, 10, 11 or 16 expected)");
}

Status emitGroupNormGrad(GradientContext &ctx, int64_t groups) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  const size_t numOut = ctx.needsGrad(2) ? 3 : ctx.needsGrad(1) ? 2 : 1;
  DTC_ASSIGN_OR_RETURN(
      std::vector<ir::Value *> g,
      ctx.emit("GroupNormGrad", {dy, ctx.input(0), ctx.input(1)}, numOut,
               {{"num_groups", ir::Attribute(groups)},
                {"epsilon", ir::Attribute(ctx.node().attrFloat("epsilon", 1e-5f))}},
               "ai.dtc"));
  for (size_t i = 0; i < 3; ++i)
    if (ctx.needsGrad(i))
      ctx.setInputGrad(i, g[i]);
  return Status::ok();
}

Expected<Cost> groupNormCost(const CostContext &ctx) {
  const std::vector<int64_t> &x = ctx.inputDims(0);
  if (x.size() < 2)
    return ctx.error("X must have rank >= 2");
  const int64_t groups = ctx.node().attrInt("num_groups", x[1]);
  const double rows = static_cast<double>(x[0]) * static_cast<double>(groups);
  return ctx.withFlops(8 * ctx.inputElements(0) + 5 * rows);
}

} // namespace dtc::ops::nn
