// Conv: N-D convolution (1-D/2-D/3-D and beyond) of X [N, C, D1..Dn] with W [M, C/group, k1..kn]
// and optional bias B [M] (onnx/docs/Operators.md#Conv). Forms 1 and 11 are the same (11 only
// rewords auto_pad); output sizes follow ONNX convPoolShapeInference.
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "ops/nn/NNCommon.h"
#include "ops/training/ConvGradRules.h"

namespace dtc::ops {

namespace {

Status inferConv(InferenceContext &ctx) {
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

  // Kernel shape: the attribute, else W's spatial dims.
  std::vector<int64_t> kernel;
  if (node.hasAttr("kernel_shape")) {
    kernel = node.attrInts("kernel_shape");
    if (w.hasRank() && kernel.size() == spatial)
      for (size_t i = 0; i < spatial; ++i)
        if (w[2 + i].isStatic() && w[2 + i].value() != kernel[i])
          return ctx.error("kernel_shape does not match W " + w.str() + " on spatial axis " +
                           std::to_string(i));
  } else {
    if (!w.hasRank()) {
      ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(rank)));
      return Status::ok();
    }
    for (size_t i = 0; i < spatial; ++i) {
      if (!w[2 + i].isStatic()) {
        // Unknown kernel: validate attributes with a placeholder, spatial dims unknown.
        kernel.clear();
        break;
      }
      kernel.push_back(w[2 + i].value());
    }
  }
  bool kernelKnown = kernel.size() == spatial || node.hasAttr("kernel_shape");
  DTC_ASSIGN_OR_RETURN(
      nn::Window win,
      nn::readWindow(node, spatial, kernelKnown ? kernel : std::vector<int64_t>(spatial, 1)));

  // Channels: C_in == group * W[1]; M divisible by group; B is [M].
  ir::Dim m = w.hasRank() ? w[0] : ir::Dim::unknown();
  if (x.hasRank() && w.hasRank() && x[1].isStatic() && w[1].isStatic() &&
      __int128(x[1].value()) != __int128(group) * w[1].value())
    return ctx.error("input channels " + x[1].str() + " of X " + x.str() + " do not equal group (" +
                     std::to_string(group) + ") * W.shape[1] (" + w[1].str() + ") of W " + w.str());
  if (m.isStatic() && m.value() % group != 0)
    return ctx.error("output channels " + m.str() + " (W.shape[0]) are not divisible by group " +
                     std::to_string(group));
  if (ctx.hasInput(2) && ctx.inputShape(2).hasRank()) {
    const ir::Shape &b = ctx.inputShape(2);
    if (b.rank() != 1 || (b[0].isStatic() && m.isStatic() && b[0].value() != m.value()))
      return ctx.error("bias B " + b.str() + " must be [M] with M = " + m.str());
  }

  std::vector<ir::Dim> out;
  out.push_back(x.hasRank() ? x[0] : ir::Dim::unknown());
  out.push_back(m);
  for (size_t i = 0; i < spatial; ++i) {
    if (!kernelKnown || !x.hasRank()) {
      out.push_back(ir::Dim::unknown());
      continue;
    }
    DTC_ASSIGN_OR_RETURN(ir::Dim d, nn::windowOutputDim(x[2 + i], win, i, false, node.where()));
    out.push_back(d);
  }
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

/// Gradient of Y = conv(X, W) + B (auto_pad resolved into explicit pads):
///   dX = ai.dtc.ConvGradData(dY, W)  (the transposed convolution of dY with W),
///   dW, dB = ai.dtc.ConvGradWeight(dY, X)  (dB only when B needs a gradient),
///   dB alone = ReduceSum(dY) over N and the spatial axes.
/// Source: the convolution backward passes of oneDNN (convolution_backward_data/_weights).
Status convGradient(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> xs, grad::staticShape(ctx, ctx.input(0)));
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> ws, grad::staticShape(ctx, ctx.input(1)));
  if (xs.size() < 3 || ws.size() != xs.size())
    return ctx.error("gradient: X and W must have one rank >= 3");
  DTC_ASSIGN_OR_RETURN(
      grad::GradWindow win,
      grad::convPoolWindow(ctx.node(), {xs.begin() + 2, xs.end()}, {ws.begin() + 2, ws.end()}));
  std::map<std::string, ir::Attribute> attrs = win.attrs();
  attrs["group"] = ir::Attribute(ctx.node().attrInt("group", 1));
  if (ctx.needsGrad(0)) {
    std::map<std::string, ir::Attribute> a = attrs;
    a["input_shape"] = ir::Attribute(xs);
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("ConvGradData", {dy, ctx.input(1)}, a, "ai.dtc"));
    ctx.setInputGrad(0, dx);
  }
  bool wantBias = ctx.input(2) && ctx.needsGrad(2);
  if (ctx.needsGrad(1)) {
    DTC_ASSIGN_OR_RETURN(
        std::vector<ir::Value *> outs,
        ctx.emit("ConvGradWeight", {dy, ctx.input(0)}, wantBias ? 2 : 1, attrs, "ai.dtc"));
    ctx.setInputGrad(1, outs[0]);
    if (wantBias)
      ctx.setInputGrad(2, outs[1]);
  } else if (wantBias) {
    DTC_ASSIGN_OR_RETURN(ir::Value * db, grad::biasGrad(ctx, dy));
    ctx.setInputGrad(2, db);
  }
  return Status::ok();
}

} // namespace

namespace {

/// Conv split by output channels (W rows, bias, output channel axis) then a Conv split by input
/// channels (W axis 1; output partial, bias added after the all-reduce): the convolutional form
/// of Megatron's column/row pair. Grouped convolutions stay replicated.
Status convSharding(ShardingContext &ctx) {
  if (ctx.node().attrInt("group", 1) != 1 || ctx.inputDims(0).size() < 3)
    return Status::ok();
  const ir::Sharding &sx = ctx.input(0), &sw = ctx.input(1);
  const int64_t T = ctx.parts();
  if (sx.isSplit() && sx.axis == 1 && sx.blocks == 1 &&
      (ctx.isFreeWeight(1) || (sw.isSplit() && sw.axis == 1 && sw.blocks == 1))) {
    ctx.require(0, sx);
    ctx.require(1, ir::Sharding::split(1, T));
    ctx.setOutput(0, ir::Sharding::partial(T));
    if (ctx.hasInput(2))
      ctx.addAfterReduce(2);
    return Status::ok();
  }
  if (!sx.isReplicated())
    return Status::ok();
  const int64_t cout = ctx.inputDims(1)[0];
  const bool given = sw.isSplit() && sw.axis == 0 && sw.blocks == 1;
  if (!given &&
      !(ctx.isFreeWeight(1) && cout % T == 0 && ctx.keepsSplit(0, ir::Sharding::split(1, T))))
    return Status::ok();
  ctx.requireReplicatedCopy(0);
  ctx.require(1, ir::Sharding::split(0, T));
  if (ctx.hasInput(2))
    ctx.require(2, ir::Sharding::split(0, T));
  ctx.setOutput(0, ir::Sharding::split(1, T));
  return Status::ok();
}

} // namespace

OpDef defineConv() {
  OpDef d;
  d.name = "Conv";
  d.version(1)
      .in("X", "T")
      .in("W", "T")
      .optIn("B", "T")
      .out("Y", "T")
      .attr("auto_pad", ir::AttrKind::kString)
      .attr("dilations", ir::AttrKind::kInts)
      .attr("group", ir::AttrKind::kInt)
      .attr("kernel_shape", ir::AttrKind::kInts)
      .attr("pads", ir::AttrKind::kInts)
      .attr("strides", ir::AttrKind::kInts)
      .type("T", kFloatTypes & ~bit(ir::DType::kBFloat16));
  d.version(11);
  // Conv-22 adds bfloat16 (mixed precision's --precision bf16 casts Conv operands to it).
  d.version(22).type("T", kFloatTypes);
  d.infer = inferConv;
  d.gradient = convGradient;
  // 2 * N * Cout * prod(out spatial) * (Cin / group) * prod(kernel) FLOPs (convFlops, the
  // roofline count of direct convolution), plus one add per output element for the bias B.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double y = ctx.outputElements(0);
    return ctx.withFlops(convFlops(y, ctx.inputDims(1)) + (ctx.hasInput(2) ? y : 0));
  };
  d.sharding = convSharding;
  return d;
}

} // namespace dtc::ops
