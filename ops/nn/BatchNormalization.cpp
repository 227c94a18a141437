// BatchNormalization (onnx/docs/Operators.md#BatchNormalization). Forms: 7 (spatial attribute;
// outputs Y, mean, var, saved_mean, saved_var), 9 (no spatial), 14 (training_mode; outputs Y,
// running_mean, running_var), 15 (scale/B of type T1, mean/var of type T2). Canonical: 15.
// Normalization (7, 9 -> 15): spatial=1 is dropped (spatial=0, per-activation statistics, is
// not supported); a node with more than one output is the training form, so training_mode=1 is
// set and its mean/var outputs become running_mean/running_var (the same values: the updated
// running statistics, onnx/docs/Changelog.md BatchNormalization-9 and -14). saved_mean and
// saved_var have no canonical counterpart: they are dropped when unused, an error otherwise.
#include "ops/OpDef.h"

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
  return d;
}

} // namespace dtc::ops
