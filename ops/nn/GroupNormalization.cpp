// GroupNormalization (onnx/docs/Operators.md#GroupNormalization; Wu & He 2018): X (N, C, D1..Dn)
// has its channels cut into num_groups groups of C / num_groups consecutive channels; each
// (sample, group) is normalized over its channels and spatial elements, then scaled and shifted
// per channel. Forms: 18 (scale and bias per group, [num_groups]; deprecated by ONNX) and 21
// (per channel, [C]; stash_type). Canonical form: 21. Gradient: ai.dtc.GroupNormGrad
// (ops/training/NNGradGroupNorm.cpp).
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "ops/nn/NNCommon.h"
#include "ops/nn/NormCommon.h"

namespace dtc::ops {

namespace {

/// Opset 18's per-group scale and bias become per-channel ones by normalizing a view of X with one
/// channel per group: Y = Reshape(GroupNormalization-21(Reshape(X, [0, G, -1]), scale, bias,
/// num_groups=G), Shape(X)). This is exactly the opset-18 definition (each group's scale and bias
/// apply to all of its channels) and needs no knowledge of C at import. With one channel per group
/// the node means the same under opset 18 and 21, so an exported graph stays valid at the model's
/// opset (no stash_type is set: it is opset 21's).
Status normalizeGroupNorm(ir::Node &node, NormalizeContext &ctx) {
  if (ctx.opset() >= 21)
    return Status::ok();
  const int64_t groups = node.attrInt("num_groups", 0);
  if (groups <= 0)
    return Status::error(node.where(), "num_groups must be >= 1, got " + std::to_string(groups));
  ir::Graph &g = ctx.graph();
  ir::Value *x = node.input(0);
  // The grouped view below cannot tell a channel count that num_groups does not divide (C = 3,
  // G = 2 and 2 spatial elements reshape to [N, 2, 3]): check the declared C here.
  if (x && x->shape().hasRank() && x->shape().rank() >= 2 && x->shape()[1].isStatic() &&
      x->shape()[1].value() % groups != 0)
    return Status::error(node.where(),
                         "the channel count " + std::to_string(x->shape()[1].value()) +
                             " is not a multiple of num_groups " + std::to_string(groups));
  ir::Value *y = node.output(0);
  const std::string base = node.name().empty() ? node.opType() : node.name();
  const std::string yName = y ? y->name() : base;
  ir::Value *target = ctx.int64Constant(node, "grouped_shape", {0, groups, -1});
  ir::Node *shape = g.insertNodeBefore(&node, "Shape", {x}, {g.uniqueName(yName + ".shape")}, "",
                                       base + "/shape");
  ir::Node *grouped = g.insertNodeBefore(&node, "Reshape", {x, target},
                                         {g.uniqueName(yName + ".grouped")}, "", base + "/group");
  ir::Node *inner = g.insertNodeBefore(&node, "GroupNormalization",
                                       {grouped->output(0), node.input(1), node.input(2)},
                                       {g.uniqueName(yName + ".grouped_norm")}, "", base + "/norm");
  inner->setAttr("num_groups", ir::Attribute(groups));
  inner->setAttr("epsilon", ir::Attribute(node.attrFloat("epsilon", 1e-5f)));
  ir::Node *reshape = g.insertNodeBefore(&node, "Reshape", {inner->output(0), shape->output(0)}, {},
                                         "", base + "/reshape");
  g.transferOutputs(&node, reshape);
  g.eraseNode(&node);
  return Status::ok();
}

Status inferGroupNorm(InferenceContext &ctx) {
  const int64_t groups = ctx.node().attrInt("num_groups", 0);
  if (groups <= 0)
    return ctx.error("num_groups must be >= 1, got " + std::to_string(groups));
  DTC_RETURN_IF_ERROR(nn::checkStashType(ctx));
  DTC_ASSIGN_OR_RETURN(ir::Dim c, nn::inferChannelNorm(ctx));
  if (c.isStatic() && c.value() % groups != 0)
    return ctx.error("the channel count " + std::to_string(c.value()) +
                     " is not a multiple of num_groups " + std::to_string(groups));
  return Status::ok();
}

// dX, dscale, dbias from one ai.dtc.GroupNormGrad(dY, X, scale) node.
Status groupNormGrad(GradientContext &ctx) {
  return nn::emitGroupNormGrad(ctx, ctx.node().attrInt("num_groups", 0));
}

} // namespace

OpDef defineGroupNormalization() {
  OpDef d;
  d.name = "GroupNormalization";
  d.version(18)
      .in("X", "T")
      .in("scale", "T")
      .in("bias", "T")
      .out("Y", "T")
      .attr("epsilon", ir::AttrKind::kFloat)
      .attr("num_groups", ir::AttrKind::kInt, /*required=*/true)
      .type("T", kFloatTypes);
  d.version(21).attr("stash_type", ir::AttrKind::kInt);
  d.normalize = normalizeGroupNorm;
  d.infer = inferGroupNorm;
  d.gradient = groupNormGrad;
  d.cost = nn::groupNormCost;
  // The batch axis is independent; channels mix within a group and spatial axes within a sample.
  d.sharding = independentAxesSharding([](const ShardingContext &ctx) {
    std::vector<int64_t> axes;
    for (int64_t a = 1; a < static_cast<int64_t>(ctx.inputDims(0).size()); ++a)
      axes.push_back(a);
    return axes;
  });
  return d;
}

} // namespace dtc::ops
