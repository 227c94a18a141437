// ai.dtc ops of the ActivationGrad family: the fused backward ops that the gradient rules of the
// unary activations, Clip, Softmax and LogSoftmax emit (ops/activation/), and training-mode
// Dropout (DropoutTraining, made from ONNX Dropout with training_mode true) with its gradient.
// CPU kernels: ops/cpu/ActivationGrad*.cpp.
#include "ops/OpDef.h"
#include "ops/activation/Activation.h"
#include "ops/Sharding.h"

#include <algorithm>
#include <array>

namespace dtc::ops {

namespace {

constexpr TypeMask kGradTypes = kFloatTypes;

/// EltwiseGrad algorithms: name, and whether input 1 is the forward output Y (else the input X).
struct EltwiseAlgorithm {
  const char *name;
  bool fromOutput;
};
constexpr std::array<EltwiseAlgorithm, 22> kEltwiseAlgorithms = {{
    {"relu", false},
    {"relu_dst", true},
    {"logistic_dst", true},
    {"tanh_dst", true},
    {"exp_dst", true},
    {"sqrt_dst", true},
    {"reciprocal_dst", true},
    {"log", false},
    {"abs", false},
    {"erf", false},
    {"gelu_erf", false},
    {"gelu_tanh", false},
    {"hardswish", false},
    {"hardsigmoid", false},
    {"soft_relu", false},
    {"softsign", false},
    {"elu", false},
    {"selu", false},
    {"celu", false},
    {"mish", false},
    {"sin", false},
    {"cos", false},
}};

/// Errors unless inputs 0 and `i` have equal shapes (when both are known); output 0 = input 0's
/// shape.
Status inferSameAsGrad(InferenceContext &ctx, size_t i, const char *what) {
  const ir::Shape &a = ctx.inputShape(0), &b = ctx.inputShape(i);
  if (a.hasRank() && b.hasRank() && a.isStatic() && b.isStatic() && a != b)
    return ctx.error(std::string("dY ") + a.str() + " and " + what + " " + b.str() +
                     " must have one shape");
  ctx.setOutputShape(0, a.hasRank() ? a : b);
  return Status::ok();
}

Status checkRatio(InferenceContext &ctx) {
  const float ratio = ctx.node().attrFloat("ratio", 0.5f);
  if (!(ratio >= 0.f && ratio < 1.f))
    return ctx.error("ratio must be in [0, 1), got " + std::to_string(ratio));
  return Status::ok();
}

/// SoftmaxGrad / LogSoftmaxGrad: (dY, Y) -> dX, attribute axis (default -1).
OpDef softmaxGradDef(const std::string &name) {
  OpDef d;
  d.name = name;
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .in("Y", "T")
      .out("dX", "T")
      .attr("axis", ir::AttrKind::kInt)
      .type("T", kGradTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &s = ctx.inputShape(0);
    const int64_t axis = ctx.node().attrInt("axis", -1);
    if (s.hasRank()) {
      const int64_t rank = static_cast<int64_t>(s.rank());
      if (rank == 0 || axis < -rank || axis >= rank)
        return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                         std::to_string(rank));
    }
    return inferSameAsGrad(ctx, 1, "Y");
  };
  // SoftmaxGrad dX = Y * (dY - sum(dY * Y)): multiply, sum, subtract, multiply; LogSoftmaxGrad
  // dX = dY - exp(Y) * sum(dY): sum, exp, multiply, subtract. 4 FLOPs per element either way.
  d.cost = elementwiseCost(4);
  return d;
}

} // namespace

/// EltwiseGrad(dY, T) -> dX, all of one shape: the gradient of a unary activation, dX = dY *
/// f'(.), where T is the forward input X or, for the *_dst algorithms, the forward output Y.
/// Attributes: algorithm (string, required), alpha and beta (floats, default 0):
///   relu           T = X: X > 0 ? dY : alpha * dY          (LeakyRelu with alpha < 0)
///   relu_dst       T = Y: Y > 0 ? dY : alpha * dY, alpha >= 0 (Relu: 0 at X = 0, as PyTorch)
///   logistic_dst   T = Y: dY * Y * (1 - Y)
///   tanh_dst       T = Y: dY * (1 - Y^2)
///   exp_dst        T = Y: dY * Y
///   sqrt_dst       T = Y: dY / (2 Y)                      (+inf at Y = 0 for dY > 0)
///   reciprocal_dst T = Y: -dY * Y^2
///   log            T = X: dY / X
///   abs            T = X: dY * sign(X), 0 at X = 0
///   erf            T = X: dY * 2/sqrt(pi) * exp(-X^2)
///   gelu_erf       T = X: dY * (Phi(X) + X phi(X))
///   gelu_tanh      T = X: derivative of 0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3)))
///   hardswish      T = X: X < -3 ? 0 : X <= 3 ? dY (X/3 + 1/2) : dY   (PyTorch's kinks)
///   hardsigmoid    T = X: 0 < alpha X + beta < 1 ? alpha dY : 0
///   soft_relu      T = X: dY * sigmoid(X)                  (Softplus)
///   softsign       T = X: dY / (1 + |X|)^2
///   elu            T = X: X > 0 ? dY : alpha e^X dY
///   selu           T = X: X > 0 ? beta dY : beta alpha e^X dY   (beta = Selu's gamma)
///   celu           T = X: X > 0 ? dY : e^(X / alpha) dY
///   mish           T = X: dY (tanh(sp) + X sigmoid(X) (1 - tanh(sp)^2)), sp = softplus(X)
///   sin            T = X: dY cos(X)
///   cos            T = X: -dY sin(X)
/// The formulas are oneDNN's eltwise backward definitions (oneDNN 2.6 developer guide,
/// "Eltwise"), PyTorch's for erf, reciprocal, hardswish, hardsigmoid, softsign, selu and celu.
OpDef defineEltwiseGrad() {
  OpDef d;
  d.name = "EltwiseGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .in("T", "T")
      .out("dX", "T")
      .attr("algorithm", ir::AttrKind::kString, /*required=*/true)
      .attr("alpha", ir::AttrKind::kFloat)
      .attr("beta", ir::AttrKind::kFloat)
      .type("T", kGradTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string alg = ctx.node().attrString("algorithm", "");
    auto it = std::find_if(kEltwiseAlgorithms.begin(), kEltwiseAlgorithms.end(),
                           [&](const EltwiseAlgorithm &a) { return alg == a.name; });
    if (it == kEltwiseAlgorithms.end())
      return ctx.error("unknown algorithm '" + alg + "'");
    if (alg == "relu_dst" && ctx.node().attrFloat("alpha", 0.f) < 0.f)
      return ctx.error("algorithm relu_dst needs alpha >= 0");
    return inferSameAsGrad(ctx, 1, "T");
  };
  // Per element: the derivative (1, whatever the algorithm, as the forward counts) times dY.
  d.cost = elementwiseCost(2);
  return d;
}

/// ClipGrad(dY, X, min?, max?) -> dX = min <= X <= max ? dY : 0 (inclusive at both bounds, as
/// PyTorch's clamp backward; an omitted bound is no bound; NaN X gives 0). min and max are
/// scalars of X's dtype (Clip-13's canonical bound inputs).
OpDef defineClipGrad() {
  OpDef d;
  d.name = "ClipGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .in("X", "T")
      .optIn("min", "T")
      .optIn("max", "T")
      .out("dX", "T")
      .type("T", kGradTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 2, "input 'min'"));
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 3, "input 'max'"));
    return inferSameAsGrad(ctx, 1, "X");
  };
  // Per element: the range test on X and the select of dY or 0.
  d.cost = elementwiseCost(2);
  return d;
}

/// SoftmaxGrad(dY, Y) -> dX = Y * (dY - sum(dY * Y, axis, keepdims)) (oneDNN softmax backward).
OpDef defineSoftmaxGrad() { return softmaxGradDef("SoftmaxGrad"); }

/// LogSoftmaxGrad(dY, Y) -> dX = dY - exp(Y) * sum(dY, axis, keepdims) (oneDNN logsoftmax
/// backward).
OpDef defineLogSoftmaxGrad() { return softmaxGradDef("LogSoftmaxGrad"); }

/// DropoutTraining(data f32[...], rng i64[3] = {seed, step, rank}) -> output f32[...] =
/// data * mask / (1 - ratio), mask bool[...]. Attributes: ratio (float in [0, 1), default 0.5),
/// stream (int, default 0: distinguishes the Dropout nodes of one graph). The mask comes from a
/// counter-based generator, Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
/// 1, 2, 3", SC 2011): key = {lo32(seed), hi32(seed) xor lo32(rank)}, counter = {lo32(b),
/// hi32(b), lo32(stream), lo32(step)} for the block b = i / 4 of element i, whose word i % 4 is
/// u; element i is kept when u >= floor(ratio * 2^32). A run is thus reproducible and does not
/// depend on thread count; steps, streams and ranks draw independent masks. ratio 0 keeps every
/// element. A dropped element's output is 0 (even for inf or NaN data).
OpDef defineDropoutTraining() {
  OpDef d;
  d.name = "DropoutTraining";
  d.domain = "ai.dtc";
  d.version(1)
      .in("data", "T")
      .in("rng", "I")
      .out("output", "T")
      .out("mask", "B")
      .attr("ratio", ir::AttrKind::kFloat)
      .attr("stream", ir::AttrKind::kInt)
      .type("T", bit(ir::DType::kFloat32))
      .type("I", kInt64Type)
      .type("B", kBoolType);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(checkRatio(ctx));
    const ir::Shape &rng = ctx.inputShape(1);
    if (rng.hasRank() && (rng.rank() != 1 || (rng[0].isStatic() && rng[0].value() != 3)))
      return ctx.error("rng must be i64[3] = {seed, step, rank}, got shape " + rng.str());
    ctx.setOutputShape(0, ctx.inputShape(0));
    ctx.setOutputShape(1, ctx.inputShape(0));
    return Status::ok();
  };
  // dX = dY * mask / (1 - ratio): one ai.dtc.DropoutGrad. rng (i64) gets none.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("DropoutGrad", {ctx.outputGrad(0), ctx.output(1)},
                                   {{"ratio", ir::Attribute(ctx.node().attrFloat("ratio", 0.5f))}},
                                   "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // Per element: the mask test on the random draw and the scaled multiply (the generator's own
  // arithmetic is not counted).
  d.cost = elementwiseCost(2);
  d.sharding = replicatedSharding();
  return d;
}

/// DropoutGrad(dY f32[...], mask bool[...]) -> dX = mask ? dY / (1 - ratio) : 0. Attribute ratio
/// (float in [0, 1), default 0.5), the forward's.
OpDef defineDropoutGrad() {
  OpDef d;
  d.name = "DropoutGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dY", "T")
      .in("mask", "B")
      .out("dX", "T")
      .attr("ratio", ir::AttrKind::kFloat)
      .type("T", bit(ir::DType::kFloat32))
      .type("B", kBoolType);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(checkRatio(ctx));
    return inferSameAsGrad(ctx, 1, "mask");
  };
  // Per element: dY * scale where the mask is set (the select is free).
  d.cost = elementwiseCost(1);
  return d;
}

} // namespace dtc::ops
