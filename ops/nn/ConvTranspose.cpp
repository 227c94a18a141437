// ConvTranspose: transposed N-D convolution of X [N, C, D1..Dn] with W [C, M/group, k1..kn] and
// optional bias B [M] (onnx/docs/Operators.md#ConvTranspose). Forms 1 and 11 are the same.
// Output size per spatial axis (ONNX convTransposeShapeInference):
//   output_shape given: those sizes;  SAME_*: in * stride;
//   otherwise: stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pad_begin -
//   pad_end.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"
#include "ops/training/ConvGradRules.h"
#include "ops/Sharding.h"

#include <limits>

namespace dtc::ops {

namespace {

Status inferConvTranspose(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  const ir::Shape &x = ctx.inputShape(0);
  const ir::Shape &w = ctx.inputShape(1);
  if (!x.hasRank() && !w.hasRank()) {
    ctx.setOutputShape(0, ir::Shape::unknownRank());
    return Status::ok();
  }
  size_t rank = x.hasRank() ? x.rank() : w.rank();
  if (rank < 3)
    return ctx.error("X must have rank >= 3 (N, C, spatial...), got " + x.str());
  if (x.hasRank() && w.hasRank() && w.rank() != x.rank())
    return ctx.error("W " + w.str() + " must have the rank of X " + x.str());
  size_t spatial = rank - 2;
  int64_t group = node.attrInt("group", 1);
  if (group < 1)
    return ctx.error("group must be >= 1, got " + std::to_string(group));

  std::vector<int64_t> kernel;
  bool kernelKnown = true;
  if (node.hasAttr("kernel_shape")) {
    kernel = node.attrInts("kernel_shape");
    if (w.hasRank() && kernel.size() == spatial)
      for (size_t i = 0; i < spatial; ++i)
        if (w[2 + i].isStatic() && w[2 + i].value() != kernel[i])
          return ctx.error("kernel_shape does not match W " + w.str() + " on spatial axis " +
                           std::to_string(i));
  } else {
    for (size_t i = 0; i < spatial && kernelKnown; ++i) {
      kernelKnown = w.hasRank() && w[2 + i].isStatic();
      if (kernelKnown)
        kernel.push_back(w[2 + i].value());
    }
  }
  DTC_ASSIGN_OR_RETURN(
      nn::Window win,
      nn::readWindow(node, spatial, kernelKnown ? kernel : std::vector<int64_t>(spatial, 1)));
  std::vector<int64_t> outputPadding =
      node.attrInts("output_padding", std::vector<int64_t>(spatial, 0));
  if (outputPadding.size() != spatial)
    return ctx.error("output_padding has " + std::to_string(outputPadding.size()) +
                     " values; expected " + std::to_string(spatial));
  for (size_t i = 0; i < spatial; ++i)
    if (outputPadding[i] < 0 ||
        (outputPadding[i] >= win.strides[i] && outputPadding[i] >= win.dilations[i]))
      return ctx.error("output_padding[" + std::to_string(i) +
                       "] = " + std::to_string(outputPadding[i]) +
                       " must be non-negative and smaller than the stride or the dilation");
  std::vector<int64_t> outputShape = node.attrInts("output_shape");
  // output_shape lists the spatial sizes; a full-rank list (N, C, spatial...) is accepted too.
  if (!outputShape.empty() && outputShape.size() != spatial) {
    if (outputShape.size() != rank)
      return ctx.error("output_shape has " + std::to_string(outputShape.size()) +
                       " values; expected " + std::to_string(spatial) + " (one per spatial axis)");
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  }

  // Channels: C_in == W[0]; output channels M = W[1] * group.
  if (x.hasRank() && w.hasRank() && x[1].isStatic() && w[0].isStatic() &&
      x[1].value() != w[0].value())
    return ctx.error("input channels " + x[1].str() + " of X " + x.str() +
                     " do not equal W.shape[0] (" + w[0].str() + ") of W " + w.str());
  if (w.hasRank() && w[0].isStatic() && w[0].value() % group != 0)
    return ctx.error("input channels " + w[0].str() + " (W.shape[0]) are not divisible by group " +
                     std::to_string(group));
  ir::Dim m = w.hasRank() ? w[1] * ir::Dim::fixed(group) : ir::Dim::unknown();
  if (ctx.hasInput(2) && ctx.inputShape(2).hasRank()) {
    const ir::Shape &b = ctx.inputShape(2);
    if (b.rank() != 1 || (b[0].isStatic() && m.isStatic() && b[0].value() != m.value()))
      return ctx.error("bias B " + b.str() + " must be [M] with M = " + m.str());
  }

  std::vector<ir::Dim> out;
  out.push_back(x.hasRank() ? x[0] : ir::Dim::unknown());
  out.push_back(m);
  for (size_t i = 0; i < spatial; ++i) {
    if (!outputShape.empty()) {
      if (outputShape[i] < 1)
        return ctx.error("output_shape values must be positive");
      out.push_back(ir::Dim::fixed(outputShape[i]));
      continue;
    }
    if (!x.hasRank()) {
      out.push_back(ir::Dim::unknown());
      continue;
    }
    const ir::Dim &in = x[2 + i];
    int64_t stride = win.strides[i];
    bool same = win.autoPad == "SAME_UPPER" || win.autoPad == "SAME_LOWER";
    if (!same && !kernelKnown) {
      out.push_back(ir::Dim::unknown());
      continue;
    }
    // 128-bit arithmetic: strides, dilations and pads come from the model unbounded.
    using Wide = __int128;
    Wide offset = 0;
    if (!same)
      offset = -Wide(stride) + outputPadding[i] + Wide(win.dilations[i]) * (win.kernel[i] - 1) + 1 -
               win.pads[i] - win.pads[i + spatial];
    Wide size = in.isStatic() ? Wide(stride) * in.value() + offset : offset;
    if (offset > std::numeric_limits<int64_t>::max() ||
        offset < std::numeric_limits<int64_t>::min() || size > std::numeric_limits<int64_t>::max())
      return ctx.error("output size on spatial axis " + std::to_string(i) +
                       " does not fit in int64 (strides, dilations or pads too large)");
    ir::Dim d = nn::affineDim(in, stride, static_cast<int64_t>(offset));
    if (d.isStatic() && d.value() < 1)
      return ctx.error("output size " + std::to_string(d.value()) + " on spatial axis " +
                       std::to_string(i) + " is not positive (pads too large)");
    out.push_back(d);
  }
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

/// Gradient of Y = conv_transpose(X, W) + B. With explicit pads (auto_pad/output_shape resolved
/// as the CPU kernel does: an even total padding split equally), ConvTranspose is the adjoint
/// of Conv(·, W) with the same window, so:
///   dX = Conv(dY, W) (same strides, pads, dilations, group; output_padding < stride only
///        trims the floor: the output has X's size),
///   dW = ai.dtc.ConvGradWeight(X, dY) (Conv's weight gradient with dY as the convolution's
///        input and X as its output gradient: dW[c, m, k] = sum X[n, c, i] dY[n, m, i s + k d
///        - pad_begin]),
///   dB = ReduceSum(dY) over N and the spatial axes.
Status convTransposeGradient(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  const ir::Node &node = ctx.node();
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> xs, grad::staticShape(ctx, ctx.input(0)));
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> ws, grad::staticShape(ctx, ctx.input(1)));
  if (xs.size() < 3 || ws.size() != xs.size())
    return ctx.error("gradient: X and W must have one rank >= 3");
  size_t sp = xs.size() - 2;
  DTC_ASSIGN_OR_RETURN(nn::Window w,
                       nn::readWindow(node, sp, std::vector<int64_t>(ws.begin() + 2, ws.end())));
  std::vector<int64_t> outputPadding = node.attrInts("output_padding", std::vector<int64_t>(sp, 0));
  std::vector<int64_t> outputShape = node.attrInts("output_shape");
  if (outputShape.size() == xs.size())
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  bool same = w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER";
  if (outputPadding.size() != sp || (!outputShape.empty() && outputShape.size() != sp))
    return ctx.error("gradient: output_padding and output_shape must have one value per spatial "
                     "axis");
  for (size_t i = 0; i < sp; ++i) {
    if (outputPadding[i] < 0 || outputPadding[i] >= w.strides[i])
      return ctx.error("gradient: output_padding must be in [0, stride)");
    if (outputShape.empty() && !same)
      continue;
    int64_t full =
        w.strides[i] * (xs[2 + i] - 1) + outputPadding[i] + w.dilations[i] * (w.kernel[i] - 1) + 1;
    int64_t target = !outputShape.empty() ? outputShape[i] : xs[2 + i] * w.strides[i];
    int64_t total = full - target;
    if (total < 0 || total % 2 != 0)
      return ctx.error("gradient: output size " + std::to_string(target) + " on spatial axis " +
                       std::to_string(i) + " needs a total padding of " + std::to_string(total) +
                       "; only an even, non-negative one is supported (give explicit pads)");
    w.pads[i] = w.pads[i + sp] = total / 2;
  }
  grad::GradWindow win{w.kernel, w.strides, w.dilations, w.pads};
  std::map<std::string, ir::Attribute> attrs = win.attrs();
  attrs["group"] = ir::Attribute(node.attrInt("group", 1));
  if (ctx.needsGrad(0)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("Conv", {dy, ctx.input(1)}, attrs));
    ctx.setInputGrad(0, dx);
  }
  if (ctx.needsGrad(1)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * dw,
                         ctx.emit1("ConvGradWeight", {ctx.input(0), dy}, attrs, "ai.dtc"));
    ctx.setInputGrad(1, dw);
  }
  if (ctx.input(2) && ctx.needsGrad(2)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * db, grad::biasGrad(ctx, dy));
    ctx.setInputGrad(2, db);
  }
  return Status::ok();
}

} // namespace

OpDef defineConvTranspose() {
  OpDef d;
  d.name = "ConvTranspose";
  d.version(1)
      .in("X", "T")
      .in("W", "T")
      .optIn("B", "T")
      .out("Y", "T")
      .attr("auto_pad", ir::AttrKind::kString)
      .attr("dilations", ir::AttrKind::kInts)
      .attr("group", ir::AttrKind::kInt)
      .attr("kernel_shape", ir::AttrKind::kInts)
      .attr("output_padding", ir::AttrKind::kInts)
      .attr("output_shape", ir::AttrKind::kInts)
      .attr("pads", ir::AttrKind::kInts)
      .attr("strides", ir::AttrKind::kInts)
      .type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.version(11);
  d.infer = inferConvTranspose;
  d.gradient = convTransposeGradient;
  // Every X element multiplies a (M / group) x prod(kernel) slice of W [C, M/group, k1..kn] into
  // Y: 2 * N * C * prod(in spatial) * (M / group) * prod(kernel) FLOPs (the MACs of the Conv it
  // is the adjoint of), plus one add per output element for the bias B.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double flops = convFlops(ctx.inputElements(0), ctx.inputDims(1));
    return ctx.withFlops(flops + (ctx.hasInput(2) ? ctx.outputElements(0) : 0));
  };
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
