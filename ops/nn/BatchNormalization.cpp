// BatchNormalization (onnx/docs/Operators.md#BatchNormalization). Forms: 7 (spatial attribute;
// outputs Y, mean, var, saved_mean, saved_var), 9 (no spatial), 14 (training_mode; outputs Y,
// running_mean, running_var), 15 (scale/B of type T1, mean/var of type T2). Canonical: 15.
// Normalization (7, 9 -> 15): spatial=1 is dropped (spatial=0, per-activation statistics, is
// not supported); a node with more than one output is the training form, so training_mode=1 is
// set and its mean/var outputs become running_mean/running_var (the same values: the updated
// running statistics, onnx/docs/Changelog.md BatchNormalization-9 and -14). saved_mean and
// saved_var have no canonical counterpart: they are dropped when unused, an error otherwise.
// Gradient: inference mode (frozen statistics) only; the training-mode conversion pass turns
// training_mode=1 nodes into ai.dtc.BatchNormTraining, which has its own rule.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

Status normalizeBatchNorm(ir::Node &node, NormalizeContext &ctx) {
  if (ctx.opset() < 9 && node.hasAttr("spatial")) {
    if (node.attrInt("spatial", 1) != 1)
      return Status::error(node.where(), "spatial=0 (per-activation statistics, opset 7 form) "
                                         "is not supported; only spatial=1 is");
    node.removeAttr("spatial");
  }
  if (ctx.opset() < 14 && node.numOutputs() > 1) {
    node.setAttr("training_mode", int64_t{1});
    for (size_t i = 3; i < node.numOutputs(); ++i) {
      const ir::Value *v = node.output(i);
      if (v->hasUses() || v->isGraphOutput())
        return Status::error(node.where(),
                             "output " + std::to_string(i) + " ('" + v->name() +
                                 "', saved_mean/saved_var of the opset " +
                                 std::to_string(ctx.opset()) +
                                 " training form) is used; it has no equivalent from opset 14 "
                                 "on and is not supported");
    }
    if (node.numOutputs() > 3)
      node.truncateOutputs(3);
  }
  return Status::ok();
}

Status inferBatchNorm(InferenceContext &ctx) {
  const ir::Shape &x = ctx.inputShape(0);
  if (x.hasRank() && x.rank() < 2)
    return ctx.error("X must have rank >= 2 (N, C, ...), got " + x.str());
  ir::Dim c = x.hasRank() ? x[1] : ir::Dim::unknown();
  static const char *kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5 && i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i) || !ctx.inputShape(i).hasRank())
      continue;
    const ir::Shape &s = ctx.inputShape(i);
    if (s.rank() != 1 || (s[0].isStatic() && c.isStatic() && s[0].value() != c.value()))
      return ctx.error(std::string(kNames[i]) + " " + s.str() + " must be [C] with C = " + c.str() +
                       " (X " + x.str() + ")");
    if (c.isUnknown())
      c = s[0];
  }
  int64_t training = ctx.node().attrInt("training_mode", 0);
  if (training != 0 && training != 1)
    return ctx.error("training_mode must be 0 or 1, got " + std::to_string(training));
  ctx.setOutputShape(0, x);
  for (size_t i = 1; i < ctx.node().numOutputs(); ++i) {
    ctx.setOutputShape(i, ir::Shape({c}));
    if (ctx.node().output(i)->dtype() == ir::DType::kUndefined && ctx.hasInput(3))
      ctx.setOutputDType(i, ctx.inputDType(3));
  }
  return Status::ok();
}

// Gradient of inference-mode BatchNormalization, Y = scale * (X - mean) * inv + B with
// inv = 1 / sqrt(var + epsilon) per channel (axis 1) and frozen mean/var. Sums run over every
// axis but 1: dX = dY * scale * inv; dB = sum(dY); S = sum(dY * (X - mean)); dScale = S * inv;
// dMean = -dB * scale * inv; dVar = -0.5 * scale * inv^3 * S = -0.5 * dScale * scale * inv.
// A training_mode=1 node is an error: training graphs use ai.dtc.BatchNormTraining.
Status batchNormInferenceGrad(GradientContext &ctx) {
  const ir::Node &node = ctx.node();
  if (node.attrInt("training_mode", 0) != 0)
    return ctx.error("no gradient rule for training_mode=1; the training-mode conversion pass "
                     "replaces it by ai.dtc.BatchNormTraining");
  for (size_t o = 1; o < node.numOutputs(); ++o)
    if (ctx.outputGrad(o))
      return ctx.error("the loss depends on output " + std::to_string(o) +
                       " (a running statistic), which is not differentiable");
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  ir::Value *x = ctx.input(0), *scale = ctx.input(1), *mean = ctx.input(3), *var = ctx.input(4);
  if (!x->shape().isStatic())
    return ctx.error("gradient: shapes must be static (got X " + x->shape().str() + ")");
  const std::vector<int64_t> xs = x->shape().staticSizes();
  std::vector<int64_t> axes = {0}, channelShape = {xs[1]};
  for (size_t i = 2; i < xs.size(); ++i) {
    axes.push_back(static_cast<int64_t>(i));
    channelShape.push_back(1);
  }
  auto sumOverBatch = [&](ir::Value *v) {
    return ctx.emit1("ReduceSum", {v, ctx.constantI64s(axes)},
                     {{"keepdims", ir::Attribute(int64_t{0})},
                      {"noop_with_empty_axes", ir::Attribute(int64_t{0})}});
  };
  const float eps = node.attrFloat("epsilon", 1e-5f);
  DTC_ASSIGN_OR_RETURN(ir::Value * ve, ctx.emit1("Add", {var, ctx.constantF32(eps)}));
  DTC_ASSIGN_OR_RETURN(ir::Value * sd, ctx.emit1("Sqrt", {ve}));
  DTC_ASSIGN_OR_RETURN(ir::Value * inv, ctx.emit1("Reciprocal", {sd}));
  DTC_ASSIGN_OR_RETURN(ir::Value * k, ctx.emit1("Mul", {scale, inv})); // scale * inv, [C]
  if (ctx.needsGrad(0)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * kr, ctx.reshapeTo(k, channelShape));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("Mul", {dy, kr}));
    ctx.setInputGrad(0, dx);
  }
  ir::Value *db = nullptr, *dscale = nullptr;
  if (ctx.needsGrad(2) || ctx.needsGrad(3)) {
    DTC_ASSIGN_OR_RETURN(db, sumOverBatch(dy));
  }
  if (ctx.needsGrad(1) || ctx.needsGrad(4)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * mr, ctx.reshapeTo(mean, channelShape));
    DTC_ASSIGN_OR_RETURN(ir::Value * xc, ctx.emit1("Sub", {x, mr}));
    DTC_ASSIGN_OR_RETURN(ir::Value * p, ctx.emit1("Mul", {dy, xc}));
    DTC_ASSIGN_OR_RETURN(ir::Value * s, sumOverBatch(p));
    DTC_ASSIGN_OR_RETURN(dscale, ctx.emit1("Mul", {s, inv}));
  }
  if (ctx.needsGrad(1))
    ctx.setInputGrad(1, dscale);
  if (ctx.needsGrad(2))
    ctx.setInputGrad(2, db);
  if (ctx.needsGrad(3)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * t, ctx.emit1("Mul", {db, k}));
    DTC_ASSIGN_OR_RETURN(ir::Value * dmean, ctx.emit1("Neg", {t}));
    ctx.setInputGrad(3, dmean);
  }
  if (ctx.needsGrad(4)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * t, ctx.emit1("Mul", {dscale, k}));
    DTC_ASSIGN_OR_RETURN(ir::Value * t2, ctx.emit1("Mul", {t, inv}));
    DTC_ASSIGN_OR_RETURN(ir::Value * dvar, ctx.emit1("Mul", {t2, ctx.constantF32(-0.5f)}));
    ctx.setInputGrad(4, dvar);
  }
  return Status::ok();
}

} // namespace

OpDef defineBatchNormalization() {
  OpDef d;
  d.name = "BatchNormalization";
  constexpr TypeMask kTypes = kFloatTypes;
  d.version(7)
      .in("X", "T")
      .in("scale", "T")
      .in("B", "T")
      .in("mean", "T")
      .in("var", "T")
      .out("Y", "T")
      .optOut("mean", "T")
      .optOut("var", "T")
      .optOut("saved_mean", "T")
      .optOut("saved_var", "T")
      .attr("epsilon", ir::AttrKind::kFloat)
      .attr("momentum", ir::AttrKind::kFloat)
      .attr("spatial", ir::AttrKind::kInt)
      .type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  OpVersion &v9 = d.version(9);
  std::erase_if(v9.attrs, [](const AttrSpec &a) { return a.name == "spatial"; });
  OpVersion &v14 = d.version(14);
  v14.inputs[3] = {"input_mean", "U", false, false};
  v14.inputs[4] = {"input_var", "U", false, false};
  v14.outputs.resize(1);
  v14.optOut("running_mean", "U").optOut("running_var", "U");
  v14.attr("training_mode", ir::AttrKind::kInt).type("T", kTypes).type("U", kTypes);
  OpVersion &v15 = d.version(15);
  v15.typeVars.clear();
  v15.inputs[1].typeVar = "T1";
  v15.inputs[2].typeVar = "T1";
  for (size_t i : {3, 4})
    v15.inputs[i].typeVar = "T2";
  for (size_t i : {1, 2})
    v15.outputs[i].typeVar = "T2";
  v15.type("T", kTypes).type("T1", kTypes).type("T2", kTypes);
  d.normalize = normalizeBatchNorm;
  d.infer = inferBatchNorm;
  d.gradient = batchNormInferenceGrad;
  // Inference: Y = (X - mean) / sqrt(var + epsilon) * scale + B (ONNX BatchNormalization), 4
  // FLOPs per element of X and 2 per channel (add epsilon, sqrt). training_mode=1:
  // nn::batchNormTrainingFlops (outputs 1 and 2 are the running statistics).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double n = ctx.inputElements(0), c = ctx.inputElements(1);
    if (ctx.node().attrInt("training_mode", 0) == 0)
      return ctx.withFlops(4 * n + 2 * c);
    int running = int(ctx.hasOutput(1)) + int(ctx.hasOutput(2));
    return ctx.withFlops(nn::batchNormTrainingFlops(n, c, running));
  };
  d.sharding = batchNormSharding();
  return d;
}

} // namespace dtc::ops
