// ai.dtc ops of the ConvGrad family: the backward ops that the gradient rules of Conv,
// ConvTranspose, MaxPool, AveragePool and Resize (ops/nn/) emit. Each carries the forward's
// window attributes with auto_pad already resolved into explicit pads (ConvGradRules.h), and
// the forward input's shape where the inputs do not determine it.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"

namespace dtc::ops {

namespace {

constexpr TypeMask kGradTypes = kFloatTypes;

/// The window attributes shared by every op of the family.
OpVersion &windowAttrs(OpVersion &v) {
  return v.attr("kernel_shape", ir::AttrKind::kInts, /*required=*/true)
      .attr("strides", ir::AttrKind::kInts)
      .attr("dilations", ir::AttrKind::kInts)
      .attr("pads", ir::AttrKind::kInts);
}

/// Output 0 takes the static shape in attribute input_shape.
Status inferFromInputShape(InferenceContext &ctx) {
  std::vector<int64_t> shape = ctx.node().attrInts("input_shape");
  for (int64_t d : shape)
    if (d < 0)
      return ctx.error("input_shape must be non-negative");
  ctx.setOutputShape(0, ir::Shape::ofStatic(shape));
  return Status::ok();
}

} // namespace

/// ConvGradData(dY [N, M, O1..On], W [M, C/group, k1..kn]) -> dX [N, C, I1..In] = input_shape:
/// the gradient of Conv's output with respect to X (a transposed convolution of dY with W, run
/// as oneDNN convolution_backward_data).
OpDef defineConvGradData() {
  OpDef d;
  d.name = "ConvGradData";
  d.domain = "ai.dtc";
  windowAttrs(d.version(1).in("dY", "T").in("W", "T").out("dX", "T").type("T", kGradTypes))
      .attr("group", ir::AttrKind::kInt)
      .attr("input_shape", ir::AttrKind::kInts, /*required=*/true);
  d.infer = inferFromInputShape;
  // The MACs of the forward Conv: 2 * numel(dY) * (C / group) * prod(kernel) FLOPs (convFlops).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(convFlops(ctx.inputElements(0), ctx.inputDims(1)));
  };
  return d;
}

/// ConvGradWeight(dY [N, M, O1..On], X [N, C, I1..In]) -> dW [M, C/group, k1..kn], dB [M]?:
/// dW[m, c, k] = sum_{n, o} dY[n, m, o] * X[n, g(m) * C/group + c, o * s + k * d - pad_begin]
/// (zero outside X) and dB = sum of dY over N and the spatial axes (oneDNN
/// convolution_backward_weights). ConvTranspose's dW is the same op with the roles of dY and X
/// swapped.
OpDef defineConvGradWeight() {
  OpDef d;
  d.name = "ConvGradWeight";
  d.domain = "ai.dtc";
  windowAttrs(d.version(1).in("dY", "T").in("X", "T").out("dW", "T").optOut("dB", "T").type(
                  "T", kGradTypes))
      .attr("group", ir::AttrKind::kInt);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &dy = ctx.inputShape(0), &x = ctx.inputShape(1);
    std::vector<int64_t> kernel = ctx.node().attrInts("kernel_shape");
    int64_t group = ctx.node().attrInt("group", 1);
    if (!dy.hasRank() || !x.hasRank() || dy.rank() != x.rank() || dy.rank() != kernel.size() + 2)
      return ctx.error("dY " + dy.str() + " and X " + x.str() +
                       " must have rank 2 + kernel_shape's length");
    if (group < 1 || !x[1].isStatic() || x[1].value() % group != 0)
      return ctx.error("group " + std::to_string(group) + " does not divide the channels of X " +
                       x.str());
    std::vector<ir::Dim> w = {dy[1], ir::Dim::fixed(x[1].value() / group)};
    for (int64_t k : kernel)
      w.push_back(ir::Dim::fixed(k));
    ctx.setOutputShape(0, ir::Shape(std::move(w)));
    if (ctx.node().numOutputs() > 1 && ctx.node().output(1))
      ctx.setOutputShape(1, ir::Shape(std::vector<ir::Dim>{dy[1]}));
    return Status::ok();
  };
  // The MACs of the forward Conv, 2 * numel(dY) * (C / group) * prod(kernel) FLOPs (convFlops
  // over dW [M, C/group, k..]), plus one add per dY element for dB.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double dy = ctx.inputElements(0);
    return ctx.withFlops(convFlops(dy, ctx.outputDims(0)) + (ctx.hasOutput(1) ? dy : 0));
  };
  return d;
}

/// MaxPoolGrad(dY [N, C, O1..On], X [N, C, I1..In]) -> dX (X's shape): each dY element goes to
/// the first maximal element of its window of X (row-major window order; pads never win),
/// recomputed from X.
OpDef defineMaxPoolGrad() {
  OpDef d;
  d.name = "MaxPoolGrad";
  d.domain = "ai.dtc";
  windowAttrs(d.version(1).in("dY", "T").in("X", "T").out("dX", "T").type("T", kGradTypes))
      .attr("ceil_mode", ir::AttrKind::kInt);
  d.infer = [](InferenceContext &ctx) -> Status {
    ctx.setOutputShape(0, ctx.inputShape(1));
    return Status::ok();
  };
  // Per dY element: prod(kernel_shape) comparisons to find the window's maximum, one add.
  d.cost = nn::poolCost(/*windowsFromInput=*/true, 1);
  return d;
}

/// AveragePoolGrad(dY [N, C, O1..On]) -> dX [N, C, I1..In] = input_shape: each dY element
/// divided by its window's divisor (as the forward kernel counts it) and added to every element
/// of its window inside X.
OpDef defineAveragePoolGrad() {
  OpDef d;
  d.name = "AveragePoolGrad";
  d.domain = "ai.dtc";
  windowAttrs(d.version(1).in("dY", "T").out("dX", "T").type("T", kGradTypes))
      .attr("ceil_mode", ir::AttrKind::kInt)
      .attr("count_include_pad", ir::AttrKind::kInt)
      .attr("input_shape", ir::AttrKind::kInts, /*required=*/true);
  d.infer = inferFromInputShape;
  // Per dY element: one divide and prod(kernel_shape) adds.
  d.cost = nn::poolCost(/*windowsFromInput=*/true, 1);
  return d;
}

/// ResizeGrad(dY) -> dX [input_shape]: the adjoint of Resize (modes nearest and linear): every
/// dY element is added to the input elements the forward read it from, with the forward's
/// weights. `scales` (one per axis) are the forward's scales; absent, scale = out / in.
OpDef defineResizeGrad() {
  OpDef d;
  d.name = "ResizeGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .out("dX", "T")
      .type("T", kGradTypes)
      .attr("mode", ir::AttrKind::kString)
      .attr("coordinate_transformation_mode", ir::AttrKind::kString)
      .attr("nearest_mode", ir::AttrKind::kString)
      .attr("scales", ir::AttrKind::kFloats)
      .attr("input_shape", ir::AttrKind::kInts, /*required=*/true);
  d.infer = [](InferenceContext &ctx) -> Status {
    std::vector<int64_t> shape = ctx.node().attrInts("input_shape");
    if (ctx.inputShape(0).hasRank() && ctx.inputShape(0).rank() != shape.size())
      return ctx.error("input_shape has " + std::to_string(shape.size()) + " values; dY has rank " +
                       std::to_string(ctx.inputShape(0).rank()));
    return inferFromInputShape(ctx);
  };
  // The adjoint of Resize (nn::resizeFlops): nearest one add per dY element, linear a
  // multiply-add per tap.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(nn::resizeFlops(ctx.node().attrString("mode", "nearest"),
                                         ctx.outputDims(0), ctx.inputDims(0), true));
  };
  return d;
}

} // namespace dtc::ops
