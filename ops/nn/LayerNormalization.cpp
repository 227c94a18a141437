// LayerNormalization (opset 17, onnx/docs/Operators.md#LayerNormalization): normalizes X over
// the axes [axis, rank) and applies Scale and optional B. Optional outputs Mean and InvStdDev
// have X's shape with the normalized axes set to 1 and the element type given by stash_type.
// Gradient: ai.dtc.LayerNormGrad (ops/training/NNGradNorm.cpp), statistics recomputed in f32.
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"
#include "ops/nn/NNCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

Status inferLayerNorm(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  const ir::Shape &x = ctx.inputShape(0);
  int64_t stash = node.attrInt("stash_type", 1);
  if (stash != static_cast<int64_t>(ir::DType::kFloat32) &&
      stash != static_cast<int64_t>(ir::DType::kBFloat16))
    return ctx.error("stash_type " + std::to_string(stash) +
                     " is not supported; expected 1 (f32) or 16 (bf16)");
  ctx.setOutputShape(0, x);
  ir::Shape stats;
  if (x.hasRank()) {
    if (x.rank() == 0)
      return ctx.error("X must have rank >= 1");
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.attrInt("axis", -1),
                                                     static_cast<int64_t>(x.rank()), node.where()));
    std::vector<ir::Dim> dims = x.dims();
    for (size_t i = static_cast<size_t>(axis); i < dims.size(); ++i)
      dims[i] = ir::Dim::fixed(1);
    stats = ir::Shape(std::move(dims));
    // Scale and B broadcast to the normalized part X.shape[axis:].
    ir::Shape tail(std::vector<ir::Dim>(x.dims().begin() + axis, x.dims().end()));
    for (size_t i = 1; i < 3 && i < ctx.numInputs(); ++i)
      if (ctx.hasInput(i) && ctx.inputShape(i).hasRank()) {
        DTC_ASSIGN_OR_RETURN(ir::Shape b, broadcastShapes({tail, ctx.inputShape(i)}, node.where()));
        if (b.rank() != tail.rank())
          return ctx.error(std::string(i == 1 ? "Scale " : "B ") + ctx.inputShape(i).str() +
                           " does not broadcast to the normalized shape " + tail.str());
      }
  }
  for (size_t i = 1; i < node.numOutputs() && i < 3; ++i) {
    ctx.setOutputShape(i, stats);
    ctx.setOutputDType(i, static_cast<ir::DType>(stash));
  }
  return Status::ok();
}

// Gradient: one ai.dtc.LayerNormGrad(dY, X, Scale) node gives dX and the gradients of Scale and
// B over the normalized shape X.shape[axis:], summed down to Scale's and B's (broadcast)
// shapes. Mean and InvStdDev are not differentiable outputs: a loss that depends on them is an
// error.
Status layerNormGrad(GradientContext &ctx) {
  for (size_t o = 1; o < 3; ++o)
    if (ctx.outputGrad(o))
      return ctx.error(std::string("the loss depends on output ") +
                       (o == 1 ? "Mean" : "InvStdDev") +
                       ", which is not differentiable (only Y is)");
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  const ir::Node &node = ctx.node();
  ir::Value *bias = ctx.input(2);
  const bool wantB = bias && ctx.needsGrad(2);
  DTC_ASSIGN_OR_RETURN(std::vector<ir::Value *> g,
                       ctx.emit("LayerNormGrad", {dy, ctx.input(0), ctx.input(1)}, wantB ? 3 : 2,
                                {{"axis", ir::Attribute(node.attrInt("axis", -1))},
                                 {"epsilon", ir::Attribute(node.attrFloat("epsilon", 1e-5f))}},
                                "ai.dtc"));
  if (ctx.needsGrad(0))
    ctx.setInputGrad(0, g[0]);
  if (ctx.needsGrad(1)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * ds, ctx.sumToShape(g[1], ctx.input(1)->shape()));
    ctx.setInputGrad(1, ds);
  }
  if (wantB) {
    DTC_ASSIGN_OR_RETURN(ir::Value * db, ctx.sumToShape(g[2], bias->shape()));
    ctx.setInputGrad(2, db);
  }
  return Status::ok();
}

} // namespace

OpDef defineLayerNormalization() {
  OpDef d;
  d.name = "LayerNormalization";
  d.version(17)
      .in("X", "T")
      .in("Scale", "T")
      .optIn("B", "T")
      .out("Y", "T")
      .optOut("Mean", "U")
      .optOut("InvStdDev", "U")
      .attr("axis", ir::AttrKind::kInt)
      .attr("epsilon", ir::AttrKind::kFloat)
      .attr("stash_type", ir::AttrKind::kInt)
      .type("T", kFloatTypes)
      .type("U", bit(ir::DType::kFloat32) | bit(ir::DType::kBFloat16));
  d.infer = inferLayerNorm;
  d.gradient = layerNormGrad;
  // Per element of X: 1 add for the mean, 3 for the variance (subtract, square, add), 2 to
  // normalize (subtract, multiply by the inverse standard deviation), 1 for Scale and 1 for B
  // when present; per row (the normalized part X.shape[axis:]): 2 divides (mean, variance) and
  // 3 for 1 / sqrt(var + epsilon). ONNX LayerNormalization-17's function body.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    DTC_ASSIGN_OR_RETURN(const double rows, nn::layerNormRows(ctx, 0));
    double n = ctx.inputElements(0);
    return ctx.withFlops((7 + (ctx.hasInput(2) ? 1 : 0)) * n + 5 * rows);
  };
  d.sharding = layerNormSharding();
  return d;
}

} // namespace dtc::ops
