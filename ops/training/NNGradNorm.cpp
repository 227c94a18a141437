// ai.dtc normalization ops of training graphs: BatchNormTraining (the training-mode forward that
// the training-mode conversion pass puts in place of BatchNormalization) with its gradient rule,
// BatchNormGrad (its backward), and LayerNormGrad (the backward of LayerNormalization).
// Statistics follow PyTorch's training forward (torch.nn.BatchNorm*d, LayerNorm); with sync=1
// the batch statistics span the data-parallel group (torch.nn.SyncBatchNorm).
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"
#include "ops/nn/NNCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Checks that inputs [first, last) of a batch-norm-like node are [C], C = X.shape[1].
Status checkChannelInputs(InferenceContext &ctx, const ir::Shape &x, size_t first, size_t last,
                          const char *const *names, ir::Dim &c) {
  for (size_t i = first; i < last && i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i) || !ctx.inputShape(i).hasRank())
      continue;
    const ir::Shape &s = ctx.inputShape(i);
    if (s.rank() != 1 || (s[0].isStatic() && c.isStatic() && s[0].value() != c.value()))
      return ctx.error(std::string(names[i]) + " " + s.str() + " must be [C] with C = " + c.str() +
                       " (X " + x.str() + ")");
    if (c.isUnknown())
      c = s[0];
  }
  return Status::ok();
}

/// X of a batch-norm-like node (input `xIndex`): rank >= 2; returns C (X.shape[1]).
Expected<ir::Dim> channelDim(InferenceContext &ctx, size_t xIndex) {
  const ir::Shape &x = ctx.inputShape(xIndex);
  if (x.hasRank() && x.rank() < 2)
    return ctx.error("X must have rank >= 2 (N, C, ...), got " + x.str());
  return x.hasRank() ? x[1] : ir::Dim::unknown();
}

/// The `sync` attribute of BatchNormTraining and BatchNormGrad: 0 or 1.
Status checkSync(InferenceContext &ctx) {
  int64_t sync = ctx.node().attrInt("sync", 0);
  if (sync != 0 && sync != 1)
    return ctx.error("sync must be 0 or 1, got " + std::to_string(sync));
  return Status::ok();
}

Status inferBatchNormTraining(InferenceContext &ctx) {
  static const char *const kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  const ir::Shape &x = ctx.inputShape(0);
  DTC_ASSIGN_OR_RETURN(ir::Dim c, channelDim(ctx, 0));
  DTC_RETURN_IF_ERROR(checkChannelInputs(ctx, x, 1, 5, kNames, c));
  float momentum = ctx.node().attrFloat("momentum", 0.9f);
  if (!(momentum >= 0.f && momentum <= 1.f))
    return ctx.error("momentum must be in [0, 1], got " + std::to_string(momentum));
  DTC_RETURN_IF_ERROR(checkSync(ctx));
  ctx.setOutputShape(0, x);
  for (size_t i = 1; i < ctx.node().numOutputs(); ++i)
    if (ctx.node().output(i))
      ctx.setOutputShape(i, ir::Shape({c}));
  return Status::ok();
}

Status inferBatchNormGrad(InferenceContext &ctx) {
  static const char *const kNames[] = {"dY", "X", "scale", "saved_mean", "saved_var"};
  const ir::Shape &dy = ctx.inputShape(0);
  const ir::Shape &x = ctx.inputShape(1);
  if (dy.hasRank() && x.hasRank() && dy != x)
    return ctx.error("dY " + dy.str() + " and X " + x.str() + " differ");
  DTC_ASSIGN_OR_RETURN(ir::Dim c, channelDim(ctx, 1));
  DTC_RETURN_IF_ERROR(checkChannelInputs(ctx, x, 2, 5, kNames, c));
  DTC_RETURN_IF_ERROR(checkSync(ctx));
  ctx.setOutputShape(0, x);
  for (size_t i = 1; i < ctx.node().numOutputs(); ++i)
    if (ctx.node().output(i))
      ctx.setOutputShape(i, ir::Shape({c}));
  return Status::ok();
}

Status inferLayerNormGrad(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  const ir::Shape &dy = ctx.inputShape(0);
  const ir::Shape &x = ctx.inputShape(1);
  if (dy.hasRank() && x.hasRank() && dy != x)
    return ctx.error("dY " + dy.str() + " and X " + x.str() + " differ");
  ctx.setOutputShape(0, x);
  if (!x.hasRank()) {
    for (size_t i = 1; i < node.numOutputs(); ++i)
      if (node.output(i))
        ctx.setOutputShape(i, ir::Shape::unknownRank());
    return Status::ok();
  }
  if (x.rank() == 0)
    return ctx.error("X must have rank >= 1");
  DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.attrInt("axis", -1),
                                                   static_cast<int64_t>(x.rank()), node.where()));
  ir::Shape tail(std::vector<ir::Dim>(x.dims().begin() + axis, x.dims().end()));
  if (ctx.inputShape(2).hasRank()) {
    DTC_ASSIGN_OR_RETURN(ir::Shape b, broadcastShapes({tail, ctx.inputShape(2)}, node.where()));
    if (b.rank() != tail.rank())
      return ctx.error("Scale " + ctx.inputShape(2).str() +
                       " does not broadcast to the normalized shape " + tail.str());
  }
  for (size_t i = 1; i < node.numOutputs(); ++i)
    if (node.output(i))
      ctx.setOutputShape(i, tail);
  return Status::ok();
}

/// BatchNormTraining's gradient: one BatchNormGrad node from the saved batch statistics, with
/// the forward's epsilon and sync (a synchronized forward needs a synchronized backward: dX
/// depends on the whole group's batch through its statistics).
/// input_mean and input_var are state (running statistics): they get no gradient. Gradients
/// reaching running_mean, running_var, saved_mean or saved_var are an error (they are state or
/// saved values, not differentiable outputs).
Status batchNormTrainingGrad(GradientContext &ctx) {
  static const char *const kOut[] = {"Y", "running_mean", "running_var", "saved_mean", "saved_var"};
  for (size_t o = 1; o < 5; ++o)
    if (ctx.outputGrad(o))
      return ctx.error(std::string("the loss depends on output ") + kOut[o] +
                       ", which is not differentiable (only Y is)");
  for (size_t i = 3; i < 5; ++i)
    if (ctx.needsGrad(i))
      return ctx.error("input " + std::to_string(i) + " ('" + ctx.input(i)->name() +
                       "') is a running statistic (state); it cannot be trained");
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  ir::Value *mean = ctx.output(3), *var = ctx.output(4);
  if (!mean || !var)
    return ctx.error("the gradient needs outputs 3 and 4 (saved_mean, saved_var); the node "
                     "has " +
                     std::to_string(ctx.node().numOutputs()) + " outputs");
  size_t numOut = ctx.needsGrad(1) || ctx.needsGrad(2) ? 3 : 1;
  DTC_ASSIGN_OR_RETURN(std::vector<ir::Value *> g,
                       ctx.emit("BatchNormGrad", {dy, ctx.input(0), ctx.input(1), mean, var},
                                numOut,
                                {{"epsilon", ir::Attribute(ctx.node().attrFloat("epsilon", 1e-5f))},
                                 {"sync", ir::Attribute(ctx.node().attrInt("sync", 0))}},
                                "ai.dtc"));
  for (size_t i = 0; i < 3; ++i)
    if (ctx.needsGrad(i))
      ctx.setInputGrad(i, g[i]);
  return Status::ok();
}

} // namespace

// BatchNormTraining (ai.dtc): X (N, C, d1..dk), scale, B, input_mean, input_var (C each) ->
// Y, running_mean, running_var, saved_mean, saved_var (C each; outputs 1-4 optional).
//  - Y = scale * (X - mu) / sqrt(sigma2 + epsilon) + B with the batch mean mu and the biased
//    batch variance sigma2 over (N, d1..dk) (PyTorch's training forward, ONNX
//    BatchNormalization-15 with training_mode=1);
//  - running_mean = input_mean * momentum + mu * (1 - momentum) (ONNX convention: PyTorch's
//    momentum m is ONNX's 1 - m; default 0.9);
//  - running_var = input_var * momentum + sigma2 * n / (n - 1) * (1 - momentum), n = N*d1*..*dk:
//    the UNBIASED variance, as PyTorch (ONNX's reference implementation uses the biased one);
//    with n = 1 the biased variance (0) is used (PyTorch raises an error there);
//  - saved_mean = mu, saved_var = sigma2 (biased): what BatchNormGrad reads (oneDNN's backward
//    takes the variance, so it is kept rather than PyTorch's save_invstd).
//  - sync (int, default 0): 1 makes mu and sigma2 the statistics of the data-parallel group's
//    whole batch (torch.nn.SyncBatchNorm): each rank holds a shard (shards may differ in N) and
//    the kernel sums per-channel counts and moments over the group; n above is then the group's
//    total count. On one rank sync=1 is sync=0. Set by --sync-batchnorm; the gradient rule
//    copies it onto BatchNormGrad.
OpDef defineBatchNormTraining() {
  OpDef d;
  d.name = "BatchNormTraining";
  d.domain = "ai.dtc";
  d.version(1)
      .in("X", "T")
      .in("scale", "T1")
      .in("B", "T1")
      .in("input_mean", "T2")
      .in("input_var", "T2")
      .out("Y", "T")
      .optOut("running_mean", "T2")
      .optOut("running_var", "T2")
      .optOut("saved_mean", "T2")
      .optOut("saved_var", "T2")
      .attr("epsilon", ir::AttrKind::kFloat)
      .attr("momentum", ir::AttrKind::kFloat)
      .attr("sync", ir::AttrKind::kInt)
      .type("T", kFloatTypes)
      .type("T1", kFloatTypes)
      .type("T2", kFloatTypes);
  d.infer = inferBatchNormTraining;
  d.gradient = batchNormTrainingGrad;
  // nn::batchNormTrainingFlops over X and its channels (scale's elements).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    int running = int(ctx.hasOutput(1)) + int(ctx.hasOutput(2));
    return ctx.withFlops(
        nn::batchNormTrainingFlops(ctx.inputElements(0), ctx.inputElements(1), running));
  };
  d.sharding = batchNormSharding();
  return d;
}

// BatchNormGrad (ai.dtc): dY, X (N, C, d1..dk), scale, saved_mean, saved_var (C each) -> dX,
// dScale, dB (C each; optional). With xhat = (X - mean) / sqrt(var + epsilon) and sums over
// (N, d1..dk) of n elements (Ioffe & Szegedy 2015, section 3; oneDNN batch_normalization
// backward): dB = sum(dY), dScale = sum(dY * xhat),
// dX = scale / sqrt(var + epsilon) * (dY - dB / n - xhat * dScale / n).
// sync (int, default 0): 1 for the backward of a synchronized BatchNormTraining: the two sums
// in dX and n are taken over the data-parallel group (dY is each rank's rows of the gradient of
// the group's loss), while dScale and dB stay the rank's local sums (the data-parallel gradient
// all-reduce combines them, as torch.nn.SyncBatchNorm). On one rank sync=1 is sync=0.
OpDef defineBatchNormGrad() {
  OpDef d;
  d.name = "BatchNormGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .in("X", "T")
      .in("scale", "T1")
      .in("saved_mean", "T2")
      .in("saved_var", "T2")
      .out("dX", "T")
      .optOut("dScale", "T1")
      .optOut("dB", "T1")
      .attr("epsilon", ir::AttrKind::kFloat)
      .attr("sync", ir::AttrKind::kInt)
      .type("T", kFloatTypes)
      .type("T1", kFloatTypes)
      .type("T2", kFloatTypes);
  d.infer = inferBatchNormGrad;
  // The formula above, per element of X: 2 for xhat, 1 for dB, 2 for dScale, 4 for dX (dB and
  // dScale are needed for dX even when not output); per channel 4 (1 / sqrt(var + epsilon) and
  // the two divides by n).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(9 * ctx.inputElements(1) + 4 * ctx.inputElements(2));
  };
  return d;
}

// LayerNormGrad (ai.dtc): dY, X, Scale -> dX (X's shape), dScale, dB (optional), both of the
// normalized shape X.shape[axis:] (the LayerNormalization rule sums them down to Scale's and
// B's shapes). Statistics are recomputed from X in f32 (stash_type is ignored). With rows of
// the normalized part, xhat = (X - mean) * inv_std, g = dY * Scale, D = size of a row:
// dX = inv_std * (g - mean_row(g) - xhat * mean_row(g * xhat)); dScale = sum over rows of
// dY * xhat; dB = sum over rows of dY (oneDNN layer_normalization backward).
OpDef defineLayerNormGrad() {
  OpDef d;
  d.name = "LayerNormGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .in("X", "T")
      .in("Scale", "T")
      .out("dX", "T")
      .out("dScale", "T")
      .optOut("dB", "T")
      .attr("axis", ir::AttrKind::kInt)
      .attr("epsilon", ir::AttrKind::kFloat)
      .type("T", kFloatTypes);
  d.infer = inferLayerNormGrad;
  // The formula above, per element of X: 4 to recompute the statistics (mean; subtract, square,
  // add), 2 for xhat, 2 for dScale, 1 for dB when output, 1 for g, 3 for the two row sums and
  // 4 for dX; per row 7 (the statistics' divides, 1 / sqrt(var + epsilon), the two means).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    DTC_ASSIGN_OR_RETURN(const double rows, nn::layerNormRows(ctx, 1));
    double n = ctx.inputElements(1);
    return ctx.withFlops((16 + (ctx.hasOutput(2) ? 1 : 0)) * n + 7 * rows);
  };
  return d;
}

} // namespace dtc::ops
