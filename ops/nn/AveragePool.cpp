// AveragePool: mean over sliding windows of X [N, C, D1..Dn] (onnx/docs/Operators.md#
// AveragePool). Forms: 7 (count_include_pad), 10 (ceil_mode), 11 (same form, reworded pads),
// 19 (dilations). Every form is already canonical.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"
#include "ops/training/ConvGradRules.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Gradient of Y = AveragePool(X): dX = ai.dtc.AveragePoolGrad(dY), which spreads each dY
/// element, divided by its window's divisor, over the window's elements inside X. The divisor
/// is the forward CPU kernel's: count_include_pad=0 counts the elements inside X;
/// count_include_pad=1 counts the window positions inside the explicit pads (not the ceil_mode
/// extension past them, onnxruntime's rule).
Status averagePoolGradient(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy || !ctx.needsGrad(0))
    return Status::ok();
  const ir::Node &node = ctx.node();
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> xs, grad::staticShape(ctx, ctx.input(0)));
  if (xs.size() < 3)
    return ctx.error("gradient: X must have rank >= 3");
  DTC_ASSIGN_OR_RETURN(grad::GradWindow win, grad::convPoolWindow(node, {xs.begin() + 2, xs.end()},
                                                                  node.attrInts("kernel_shape")));
  std::map<std::string, ir::Attribute> attrs = win.attrs();
  attrs["ceil_mode"] = ir::Attribute(node.attrInt("ceil_mode", 0));
  attrs["count_include_pad"] = ir::Attribute(node.attrInt("count_include_pad", 0));
  attrs["input_shape"] = ir::Attribute(xs);
  DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("AveragePoolGrad", {dy}, attrs, "ai.dtc"));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace

OpDef defineAveragePool() {
  OpDef d;
  d.name = "AveragePool";
  d.version(7)
      .in("X", "T")
      .out("Y", "T")
      .attr("auto_pad", ir::AttrKind::kString)
      .attr("count_include_pad", ir::AttrKind::kInt)
      .attr("kernel_shape", ir::AttrKind::kInts, /*required=*/true)
      .attr("pads", ir::AttrKind::kInts)
      .attr("strides", ir::AttrKind::kInts)
      .type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.version(10).attr("ceil_mode", ir::AttrKind::kInt);
  d.version(11);
  d.version(19).attr("dilations", ir::AttrKind::kInts);
  d.infer = nn::inferPool;
  d.gradient = averagePoolGradient;
  // prod(kernel_shape) - 1 adds and one divide per output element (nn::poolCost).
  d.cost = nn::poolCost(/*windowsFromInput=*/false, 0);
  d.sharding = poolingSharding();
  return d;
}

} // namespace dtc::ops
