// Dropout: in training mode, output = data * mask / (1 - ratio) with a random bool mask; in
// inference mode (the default) output = data and mask is all true. ONNX Dropout-7 (`ratio`
// attribute, optional mask of T), Dropout-10 (mask is bool), Dropout-12 (`ratio` and
// `training_mode` optional inputs, `seed` attribute), Dropout-13 (bfloat16). Canonical: 12/13.
#include "ops/activation/Activation.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Dropout-7/10 -> Dropout-13: the `ratio` attribute becomes a scalar float32 input (an absent
/// attribute becomes an omitted input: the default 0.5 is the same in every version). The
/// opset 7-9 mask, typed like the data there, becomes the canonical bool mask.
Status normalizeDropout(ir::Node &node, NormalizeContext &ctx) {
  if (ctx.opset() >= 12)
    return Status::ok();
  const ir::Attribute *ratio = node.attr("ratio");
  if (!ratio)
    return Status::ok();
  ir::Value *c = ctx.floatConstant(node, "ratio", {ratio->f()}, /*scalar=*/true);
  node.removeAttr("ratio");
  node.truncateInputs(1);
  node.addInput(c);
  return Status::ok();
}

} // namespace

OpDef defineDropout() {
  OpDef d;
  d.name = "Dropout";
  d.version(7)
      .in("data", "T")
      .out("output", "T")
      .optOut("mask", "T")
      .attr("ratio", ir::AttrKind::kFloat)
      .type("T", kFloatNoBf16Types);
  OpVersion &v10 = d.version(10);
  v10.outputs[1].typeVar = "T1";
  v10.type("T1", kBoolType);
  OpVersion &v12 = d.version(12);
  v12.attrs.clear();
  v12.outputs[1].typeVar = "T2";
  v12.typeVars.erase("T1");
  v12.optIn("ratio", "T1")
      .optIn("training_mode", "T2")
      .attr("seed", ir::AttrKind::kInt)
      .type("T1", kFloatNoBf16Types)
      .type("T2", kBoolType);
  d.version(13).type("T", kFloatTypes);
  d.normalize = normalizeDropout;
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 1, "input 'ratio'"));
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 2, "input 'training_mode'"));
    if (ir::TensorDataPtr r = ctx.constantInput(1)) {
      auto v = elementsAsDoubles(*r);
      if (v && v->size() == 1 && !((*v)[0] >= 0.0 && (*v)[0] < 1.0))
        return ctx.error("ratio must be in [0, 1), got " + std::to_string((*v)[0]));
    }
    ctx.setOutputShape(0, ctx.inputShape(0));
    if (ctx.node().numOutputs() > 1) {
      ctx.setOutputShape(1, ctx.inputShape(0));
      ctx.setOutputDType(1, ir::DType::kBool);
    }
    return Status::ok();
  };
  // Inference form: output = data, so dX = dY; ratio (when it needs one) gets zeros. Training
  // mode must have been rewritten to ai.dtc.DropoutTraining (whose rule applies the mask) before
  // autodiff: a training_mode input that is not a constant false is an error naming the node.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (ir::Value *mode = ctx.input(2)) {
      bool inference = false;
      if (mode->isConstant())
        if (auto v = mode->initializer()->toInt64s(); v && v->size() == 1 && (*v)[0] == 0)
          inference = true;
      if (!inference)
        return ctx.error("training-mode Dropout has no gradient rule: rewrite it to "
                         "ai.dtc.DropoutTraining before autodiff");
    }
    if (ctx.needsGrad(0))
      ctx.setInputGrad(0, ctx.outputGrad(0));
    if (ctx.needsGrad(1)) {
      if (ctx.input(1)->dtype() != ir::DType::kFloat32 || !ctx.input(1)->shape().isStatic())
        return ctx.error("gradient: a trained ratio must be a static f32 scalar");
      ctx.setInputGrad(1, ctx.constantF32(0.f, ctx.input(1)->shape().staticSizes()));
    }
    return Status::ok();
  };
  // Inference Dropout copies data (training uses ai.dtc.DropoutTraining): no FLOPs.
  d.cost = dataMovementCost();
  d.sharding = unarySharding();
  return d;
}

} // namespace dtc::ops
