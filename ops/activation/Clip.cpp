// Clip: elementwise min(max(x, min), max). ONNX Clip-6 takes the bounds as float attributes
// `min`/`max` (defaults -inf/+inf); Clip-11 makes them optional scalar inputs of X's type;
// Clip-12 widens the types to every numeric type, Clip-13 adds bfloat16. Canonical: inputs.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Clip-6 -> Clip-13: each bound attribute becomes a scalar constant input of X's dtype when
/// that is already known at import (else float32, the type of the attribute); an absent
/// attribute becomes an omitted input (no bound).
Status normalizeClip(ir::Node &node, NormalizeContext &ctx) {
  if (ctx.opset() >= 11)
    return Status::ok();
  ir::Value *x = node.input(0);
  ir::DType dtype = x && ir::isFloat(x->dtype()) ? x->dtype() : ir::DType::kFloat32;
  ir::Value *bounds[2] = {nullptr, nullptr};
  const char *names[2] = {"min", "max"};
  for (int k = 0; k < 2; ++k) {
    const ir::Attribute *a = node.attr(names[k]);
    if (!a)
      continue;
    std::string base = (node.name().empty() ? node.opType() : node.name()) + "." + names[k];
    bounds[k] =
        ctx.graph().addConstant(base, tensorOfType(base, dtype, {}, {static_cast<double>(a->f())}));
    node.removeAttr(names[k]);
  }
  node.truncateInputs(1);
  if (bounds[0] || bounds[1])
    node.addInput(bounds[0]);
  if (bounds[1])
    node.addInput(bounds[1]);
  return Status::ok();
}

} // namespace

OpDef defineClip() {
  OpDef d;
  d.name = "Clip";
  d.version(6)
      .in("input", "T")
      .out("output", "T")
      .attr("min", ir::AttrKind::kFloat)
      .attr("max", ir::AttrKind::kFloat)
      .type("T", kFloatNoBf16Types);
  OpVersion &v11 = d.version(11);
  v11.attrs.clear();
  v11.optIn("min", "T").optIn("max", "T");
  d.version(12).type("T", kNumericTypes & ~bit(ir::DType::kBFloat16));
  d.version(13).type("T", kNumericTypes);
  d.normalize = normalizeClip;
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 1, "input 'min'"));
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 2, "input 'max'"));
    return inferSameShape(ctx);
  };
  // dX = dY where min <= X <= max (inclusive at both bounds, as PyTorch's clamp backward), else
  // 0; an omitted bound is no bound. One ai.dtc.ClipGrad(dY, X, min?, max?). The bounds get no
  // gradient: a bound computed from a trained parameter makes autodiff fail naming this node.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    std::vector<ir::Value *> ins = {ctx.outputGrad(0), ctx.input(0)};
    for (size_t i = 1; i < ctx.node().numInputs(); ++i)
      ins.push_back(ctx.input(i));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("ClipGrad", ins, {}, "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
