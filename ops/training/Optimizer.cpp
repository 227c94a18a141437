// ai.dtc optimizer ops made by the optimizer pass (passes/Optimizer.cpp): the parameter updates
// SGD, Adam and AdamW (formulas of torch.optim 1.13), the global-norm gradient clipping pair
// SumSquares + ClipGradNormScale (torch.nn.utils.clip_grad_norm_), and ZeroGradient, which resets
// a gradient accumulator. Kernels: ops/cpu/Optimizer.cpp.
//
// Every update op takes the learning rate as an f32[] input (the runtime feeds lr(step) each
// step) and an optional f32[] grad_scale that multiplies the gradient first (clipping and
// gradient accumulation), so that no scaled copy of a gradient is made. Output k of an update op
// is the new value of a state input (param_out of param, momentum_out of momentum, ...); the
// kernels are elementwise and read every element before writing it, so each output may share
// the bytes of its state input.
#include "ops/OpDef.h"

namespace dtc::ops {
namespace {

constexpr TypeMask kF32 = bit(ir::DType::kFloat32);

/// Errors unless input i is present and has exactly the shape of input 0 (param).
Status sameShapeAsParam(InferenceContext &ctx, size_t i, const std::string &what) {
  if (!ctx.hasInput(i))
    return ctx.error(what + " (input " + std::to_string(i) + ") is missing");
  if (ctx.inputShape(i) != ctx.inputShape(0))
    return ctx.error(what + " (input " + std::to_string(i) + ") has shape " +
                     ctx.inputShape(i).str() + ", the parameter " + ctx.inputShape(0).str());
  return Status::ok();
}

/// Errors unless input i (when present) is a scalar (rank 0).
Status scalarInput(InferenceContext &ctx, size_t i, const std::string &what) {
  if (!ctx.hasInput(i) || !ctx.inputShape(i).hasRank())
    return Status::ok();
  if (ctx.inputShape(i).rank() != 0)
    return ctx.error(what + " (input " + std::to_string(i) + ") must be a scalar [], got " +
                     ctx.inputShape(i).str());
  return Status::ok();
}

/// FLOPs per parameter element of the gradient scale (grad * grad_scale, when input
/// `gradScaleInput` is present).
double gradScaleFlops(const CostContext &ctx, size_t gradScaleInput) {
  return ctx.hasInput(gradScaleInput) ? 1 : 0;
}

/// Adam and AdamW share their form; they differ in how weight_decay applies.
OpDef defineAdamLike(const std::string &name) {
  OpDef d;
  d.name = name;
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("param", "T")
      .in("grad", "T")
      .in("lr", "L")
      .in("step", "I")
      .in("exp_avg", "T")
      .in("exp_avg_sq", "T")
      .optIn("grad_scale", "L")
      .out("param_out", "T")
      .out("exp_avg_out", "T")
      .out("exp_avg_sq_out", "T")
      .attr("beta1", ir::AttrKind::kFloat)
      .attr("beta2", ir::AttrKind::kFloat)
      .attr("epsilon", ir::AttrKind::kFloat)
      .attr("weight_decay", ir::AttrKind::kFloat)
      .type("T", kFloatTypes)
      .type("L", kF32)
      .type("I", kInt64Type);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(sameShapeAsParam(ctx, 1, "grad"));
    DTC_RETURN_IF_ERROR(sameShapeAsParam(ctx, 4, "exp_avg"));
    DTC_RETURN_IF_ERROR(sameShapeAsParam(ctx, 5, "exp_avg_sq"));
    DTC_RETURN_IF_ERROR(scalarInput(ctx, 2, "lr"));
    DTC_RETURN_IF_ERROR(scalarInput(ctx, 3, "step"));
    DTC_RETURN_IF_ERROR(scalarInput(ctx, 6, "grad_scale"));
    for (size_t o = 0; o < 3; ++o)
      ctx.setOutputShape(o, ctx.inputShape(0));
    return Status::ok();
  };
  // Per parameter element (the formulas at defineAdam / defineAdamW): m 3 FLOPs, v 4, the update
  // 6 (sqrt, divide by sqrt(1 - beta2^t), add epsilon, divide, multiply by the step size,
  // subtract), 1 for grad_scale when present; weight_decay != 0 adds the L2 term (2: multiply,
  // add) for Adam, the decoupled decay (1 multiply) for AdamW. The per-tensor scalars (bias
  // corrections) are not counted.
  const bool decoupled = name == "AdamW";
  d.cost = [decoupled](const CostContext &ctx) -> Expected<Cost> {
    double perElement = 13 + gradScaleFlops(ctx, 6);
    if (ctx.node().attrFloat("weight_decay", 0.f) != 0.f)
      perElement += decoupled ? 1 : 2;
    return ctx.withFlops(perElement * ctx.inputElements(0));
  };
  return d;
}

} // namespace

/// SGD(param, grad, lr, momentum?, grad_scale?) -> (param_out, momentum_out?), torch.optim.SGD
/// with dampening 0 (torch 1.13 _single_tensor_sgd), per element:
///   g = grad * grad_scale + weight_decay * param
///   momentum != 0: b = momentum * buf + g; momentum_out = b; g = nesterov ? g + momentum * b : b
///   param_out = param - lr * g
/// PyTorch sets buf = g on the first step; with dampening 0 that equals momentum * 0 + g, so a
/// zero-initialized buffer gives the same values. Attributes: momentum (default 0), nesterov
/// (int, default 0), weight_decay (default 0). The momentum input and output are present exactly
/// when momentum != 0.
OpDef defineSGD() {
  OpDef d;
  d.name = "SGD";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("param", "T")
      .in("grad", "T")
      .in("lr", "L")
      .optIn("momentum", "T")
      .optIn("grad_scale", "L")
      .out("param_out", "T")
      .optOut("momentum_out", "T")
      .attr("momentum", ir::AttrKind::kFloat)
      .attr("nesterov", ir::AttrKind::kInt)
      .attr("weight_decay", ir::AttrKind::kFloat)
      .type("T", kFloatTypes)
      .type("L", kF32);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(sameShapeAsParam(ctx, 1, "grad"));
    DTC_RETURN_IF_ERROR(scalarInput(ctx, 2, "lr"));
    DTC_RETURN_IF_ERROR(scalarInput(ctx, 4, "grad_scale"));
    const bool withMomentum = ctx.node().attrFloat("momentum", 0.f) != 0.f;
    if (withMomentum != ctx.hasInput(3) || withMomentum != (ctx.node().numOutputs() == 2))
      return ctx.error(withMomentum ? "momentum != 0 needs the momentum input and output"
                                    : "momentum is 0: the momentum input and output must be "
                                      "omitted");
    if (withMomentum)
      DTC_RETURN_IF_ERROR(sameShapeAsParam(ctx, 3, "momentum"));
    for (size_t o = 0; o < ctx.node().numOutputs(); ++o)
      ctx.setOutputShape(o, ctx.inputShape(0));
    return Status::ok();
  };
  // Per parameter element, from the formula above: grad_scale 1 (when present), weight_decay 2
  // (when != 0), the momentum buffer 2 and nesterov 2 more (when momentum != 0), the update 2.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    const ir::Node &node = ctx.node();
    double perElement = 2 + gradScaleFlops(ctx, 4);
    if (node.attrFloat("weight_decay", 0.f) != 0.f)
      perElement += 2;
    if (node.attrFloat("momentum", 0.f) != 0.f)
      perElement += node.attrInt("nesterov", 0) != 0 ? 4 : 2;
    return ctx.withFlops(perElement * ctx.inputElements(0));
  };
  return d;
}

/// Adam(param, grad, lr, step, exp_avg, exp_avg_sq, grad_scale?) -> (param_out, exp_avg_out,
/// exp_avg_sq_out), torch.optim.Adam (torch 1.13 _single_tensor_adam, amsgrad off), with t =
/// step + 1 (step counts earlier optimizer steps, from 0), per element:
///   g = grad * grad_scale + weight_decay * param                 (L2 penalty in the gradient)
///   m = beta1 * exp_avg + (1 - beta1) * g
///   v = beta2 * exp_avg_sq + (1 - beta2) * g * g
///   param_out = param - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
/// Attributes beta1 (default 0.9), beta2 (0.999), epsilon (1e-8), weight_decay (0).
OpDef defineAdam() { return defineAdamLike("Adam"); }

/// AdamW: as Adam, but weight decay is decoupled (Loshchilov & Hutter, torch.optim.AdamW 1.13):
/// param is first multiplied by (1 - lr * weight_decay), then takes the Adam step with g =
/// grad * grad_scale (no L2 term). Same inputs, outputs and attributes as Adam.
OpDef defineAdamW() { return defineAdamLike("AdamW"); }

/// SumSquares(X_1, ..., X_n) -> f32[] Y = sum over k of sum(X_k^2): the squared global L2 norm
/// of the gradients (accumulated in double). n >= 1; any shapes.
OpDef defineSumSquares() {
  OpDef d;
  d.name = "SumSquares";
  d.domain = ir::kDtcDomain;
  d.version(1).variadicIn("X", "T").out("Y", "L").type("T", kFloatTypes).type("L", kF32);
  d.infer = [](InferenceContext &ctx) -> Status {
    for (size_t i = 0; i < ctx.numInputs(); ++i)
      if (!ctx.hasInput(i))
        return ctx.error("input " + std::to_string(i) + " is missing");
    ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>{}));
    return Status::ok();
  };
  // A square and an add per element of every input.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double n = 0;
    for (size_t i = 0; i < ctx.numInputs(); ++i)
      n += ctx.inputElements(i);
    return ctx.withFlops(2 * n);
  };
  return d;
}

/// ClipGradNormScale(S_1, ..., S_n) -> f32[] scale: the factor the update ops multiply the
/// gradients by (their grad_scale) for global-norm clipping, torch.nn.utils.clip_grad_norm_:
///   norm = input_scale * sqrt(S_1 + ... + S_n)     (the S_k are partial sums of squares of the
///                                                    unscaled gradients, from SumSquares)
///   scale = input_scale * min(max_norm / (norm + 1e-6), 1)
/// input_scale (default 1) is a factor the gradients carry before clipping (1/K for K
/// accumulated micro-batches). A NaN norm gives a NaN scale; an infinite one gives 0.
/// Attributes: max_norm (float, required, > 0), input_scale (float, default 1).
OpDef defineClipGradNormScale() {
  OpDef d;
  d.name = "ClipGradNormScale";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .variadicIn("sum_squares", "L")
      .out("scale", "L")
      .attr("max_norm", ir::AttrKind::kFloat, true)
      .attr("input_scale", ir::AttrKind::kFloat)
      .type("L", kF32);
  d.infer = [](InferenceContext &ctx) -> Status {
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      if (!ctx.hasInput(i))
        return ctx.error("input " + std::to_string(i) + " is missing");
      DTC_RETURN_IF_ERROR(scalarInput(ctx, i, "sum_squares"));
    }
    if (!(ctx.node().attrFloat("max_norm", 0.f) > 0.f))
      return ctx.error("max_norm must be > 0");
    ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>{}));
    return Status::ok();
  };
  // Scalars: n - 1 adds for the sum, then sqrt, two multiplies, an add, a divide and a min.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(static_cast<double>(ctx.numInputs()) + 5);
  };
  return d;
}

/// ZeroGradient(X, after) -> zeros of X's type. `after` is not read: it orders the reset after
/// the node producing it (the update that last reads the accumulated gradient X), as
/// onnxruntime's training ZeroGradient does. The output may share X's bytes.
OpDef defineZeroGradient() {
  OpDef d;
  d.name = "ZeroGradient";
  d.domain = ir::kDtcDomain;
  d.version(1)
      .in("X", "T")
      .in("after", "A")
      .out("Y", "T")
      .type("T", kFloatTypes)
      .type("A", kAllTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    ctx.setOutputShape(0, ctx.inputShape(0));
    return Status::ok();
  };
  // Overwrites X with zeros; reads neither X nor `after`.
  d.cost = writeOnlyCost();
  return d;
}

} // namespace dtc::ops
