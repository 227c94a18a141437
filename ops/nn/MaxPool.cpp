// MaxPool: max over sliding windows of X [N, C, D1..Dn] (onnx/docs/Operators.md#MaxPool).
// Forms: 1 (Y only), 8 (optional Indices output, storage_order), 10 (dilations, ceil_mode),
// 11 (same form, reworded pads), 12 (int8/uint8 types). Every form is already canonical.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"
#include "ops/training/ConvGradRules.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Gradient of Y = MaxPool(X): dX = ai.dtc.MaxPoolGrad(dY, X), which recomputes each window's
/// argmax from X (the inference kernel keeps no workspace) and adds dY there. Ties go to the
/// first maximal element in the window's row-major order (PyTorch also picks one element);
/// pads never win. The Indices output carries no gradient.
Status maxPoolGradient(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy || !ctx.needsGrad(0))
    return Status::ok();
  const ir::Node &node = ctx.node();
  if (node.attrInt("storage_order", 0) != 0)
    return ctx.error("gradient: storage_order=1 is not supported");
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> xs, grad::staticShape(ctx, ctx.input(0)));
  if (xs.size() < 3)
    return ctx.error("gradient: X must have rank >= 3");
  DTC_ASSIGN_OR_RETURN(grad::GradWindow win, grad::convPoolWindow(node, {xs.begin() + 2, xs.end()},
                                                                  node.attrInts("kernel_shape")));
  std::map<std::string, ir::Attribute> attrs = win.attrs();
  attrs["ceil_mode"] = ir::Attribute(node.attrInt("ceil_mode", 0));
  DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                       ctx.emit1("MaxPoolGrad", {dy, ctx.input(0)}, attrs, "ai.dtc"));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace

OpDef defineMaxPool() {
  OpDef d;
  d.name = "MaxPool";
  d.version(1)
      .in("X", "T")
      .out("Y", "T")
      .attr("auto_pad", ir::AttrKind::kString)
      .attr("kernel_shape", ir::AttrKind::kInts, /*required=*/true)
      .attr("pads", ir::AttrKind::kInts)
      .attr("strides", ir::AttrKind::kInts)
      .type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.version(8)
      .optOut("Indices", "I")
      .attr("storage_order", ir::AttrKind::kInt)
      .type("I", kInt64Type);
  d.version(10).attr("ceil_mode", ir::AttrKind::kInt).attr("dilations", ir::AttrKind::kInts);
  d.version(11);
  d.version(12).type("T", (kFloatTypes & ~bit(ir::DType::kBFloat16)) | bit(ir::DType::kInt8) |
                              bit(ir::DType::kUInt8));
  d.infer = [](InferenceContext &ctx) -> Status {
    int64_t order = ctx.node().attrInt("storage_order", 0);
    if (order != 0 && order != 1)
      return ctx.error("storage_order must be 0 (row major) or 1 (column major), got " +
                       std::to_string(order));
    DTC_RETURN_IF_ERROR(nn::inferPool(ctx));
    if (ctx.node().numOutputs() > 1)
      ctx.setOutputDType(1, ir::DType::kInt64);
    return Status::ok();
  };
  d.gradient = maxPoolGradient;
  // prod(kernel_shape) comparisons per output element (nn::poolCost).
  d.cost = nn::poolCost(/*windowsFromInput=*/false, 0);
  d.sharding = poolingSharding();
  return d;
}

} // namespace dtc::ops
