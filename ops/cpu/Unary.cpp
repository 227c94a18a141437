// CPU kernels of the elementwise math ops Sqrt, Exp, Abs, LeakyRelu, HardSwish, Gelu, Elu, Mish
// (one oneDNN eltwise_forward primitive each, f32), Softplus (a loop: oneDNN's soft_relu is
// inaccurate for negative x), Softsign, Selu, Celu, Sin, Cos (hand loops: oneDNN 2.6 has none),
// Log, Neg, Reciprocal, Erf, HardSigmoid, Clip (hand loops: oneDNN 2.6 has no erf or
// hardsigmoid, its jit log is off by ~1.4e-6 absolute near x = 1 (log(1) != 0, measured on
// avx512_core), Clip's bounds are run-time inputs, and loops keep Neg's -0 and Reciprocal's 1/x
// exact), Floor, Ceil, Round (halves to even) and Sign (hand loops), and Pow (numpy
// broadcasting; f32 base, f32 or i64 exponent). Neg, Abs and Clip also take i64. The same-shape
// ops run in place and accept any one layout for input and output. NaN inputs give NaN outputs
// (oneDNN's exp, elu, mish and alpha-0 relu through NanPropagation.h).
#include "ops/cpu/BroadcastUtil.h"
#include "ops/cpu/NanPropagation.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace dtc::ops::cpu {

namespace {

enum class UnOp {
  kSqrt,
  kExp,
  kLog,
  kAbs,
  kLeakyRelu,
  kHardSwish,
  kGelu,
  kNeg,
  kReciprocal,
  kErf,
  kHardSigmoid,
  kFloor,
  kCeil,
  kRound,
  kSign,
  kSoftplus,
  kSoftsign,
  kElu,
  kSelu,
  kCelu,
  kMish,
  kSin,
  kCos,
  kClip,
};

UnOp unOp(const std::string &op) {
  static const std::pair<const char *, UnOp> kOps[] = {
      {"Sqrt", UnOp::kSqrt},
      {"Exp", UnOp::kExp},
      {"Log", UnOp::kLog},
      {"Abs", UnOp::kAbs},
      {"LeakyRelu", UnOp::kLeakyRelu},
      {"HardSwish", UnOp::kHardSwish},
      {"Gelu", UnOp::kGelu},
      {"Neg", UnOp::kNeg},
      {"Reciprocal", UnOp::kReciprocal},
      {"Erf", UnOp::kErf},
      {"HardSigmoid", UnOp::kHardSigmoid},
      {"Floor", UnOp::kFloor},
      {"Ceil", UnOp::kCeil},
      {"Round", UnOp::kRound},
      {"Sign", UnOp::kSign},
      {"Softplus", UnOp::kSoftplus},
      {"Softsign", UnOp::kSoftsign},
      {"Elu", UnOp::kElu},
      {"Selu", UnOp::kSelu},
      {"Celu", UnOp::kCelu},
      {"Mish", UnOp::kMish},
      {"Sin", UnOp::kSin},
      {"Cos", UnOp::kCos},
  };
  for (const auto &[name, value] : kOps)
    if (op == name)
      return value;
  return UnOp::kClip;
}

/// The oneDNN algorithm with its alpha/beta for an f32 op, or false when the op is a loop.
bool eltwiseAlgorithm(const KernelSpec &spec, UnOp op, dnnl::algorithm &alg, float &alpha) {
  alpha = 0.f;
  switch (op) {
  case UnOp::kSqrt:
    alg = dnnl::algorithm::eltwise_sqrt;
    return true;
  case UnOp::kExp:
    alg = dnnl::algorithm::eltwise_exp;
    return true;
  case UnOp::kAbs:
    alg = dnnl::algorithm::eltwise_abs;
    return true;
  case UnOp::kLeakyRelu:
    // oneDNN relu: x > 0 ? x : alpha * x, equal to ONNX's x >= 0 ? x : alpha * x.
    alg = dnnl::algorithm::eltwise_relu;
    alpha = spec.attrFloat("alpha", 0.01f);
    return true;
  case UnOp::kHardSwish:
    // oneDNN 2.6 hardswish: x * relu6(x + 3) / 6, the ONNX formula.
    alg = dnnl::algorithm::eltwise_hardswish;
    return true;
  case UnOp::kGelu:
    alg = spec.attrString("approximate", "none") == "tanh" ? dnnl::algorithm::eltwise_gelu_tanh
                                                           : dnnl::algorithm::eltwise_gelu_erf;
    return true;
  case UnOp::kElu:
    // oneDNN elu: x > 0 ? x : alpha (e^x - 1), equal to ONNX's form (0 at 0 either way).
    alg = dnnl::algorithm::eltwise_elu;
    alpha = spec.attrFloat("alpha", 1.f);
    return true;
  case UnOp::kMish:
    alg = dnnl::algorithm::eltwise_mish;
    return true;
  default:
    return false;
  }
}

/// The hand loops (f32 and, for Neg/Abs/Clip, i64). Reads element i before writing element i,
/// so it is correct in place.
class UnaryLoopKernel : public Kernel {
public:
  explicit UnaryLoopKernel(const KernelSpec &spec)
      : op_(unOp(spec.op)), dtype_(spec.inputs[0].dtype), n_(spec.inputs[0].numElements()) {
    // The attributes' defaults from the ONNX operator text: HardSigmoid alpha 0.2, beta 0.5;
    // Selu alpha 1.6732632, gamma 1.0507010 (kept in beta_); Celu alpha 1.
    if (op_ == UnOp::kSelu) {
      alpha_ = spec.attrFloat("alpha", 1.67326319217681884765625f);
      beta_ = spec.attrFloat("gamma", 1.05070102214813232421875f);
    } else {
      alpha_ = spec.attrFloat("alpha", op_ == UnOp::kCelu ? 1.f : 0.2f);
      beta_ = spec.attrFloat("beta", 0.5f);
    }
  }

  Status run(const KernelArgs &args) override {
    if (dtype_ == ir::DType::kFloat32)
      return loop<float>(args);
    return loop<int64_t>(args);
  }

private:
  template <typename T> Status loop(const KernelArgs &args) {
    const T *x = static_cast<const T *>(args.inputs[0]);
    T *y = static_cast<T *>(args.outputs[0]);
    if (op_ == UnOp::kClip) {
      // ONNX Clip-13: Min(max, Max(x, min)); an omitted bound is no bound, and min > max gives
      // max everywhere (as the spec and onnxruntime). NaN inputs stay NaN.
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      bool hasLo = args.numInputs > 1 && args.inputs[1];
      bool hasHi = args.numInputs > 2 && args.inputs[2];
      if (hasLo)
        lo = *static_cast<const T *>(args.inputs[1]);
      if (hasHi)
        hi = *static_cast<const T *>(args.inputs[2]);
      if constexpr (std::is_same_v<T, float>) {
        if (!hasLo)
          lo = -std::numeric_limits<float>::infinity();
        if (!hasHi)
          hi = std::numeric_limits<float>::infinity();
      }
      for (int64_t i = 0; i < n_; ++i) {
        T v = x[i] < lo ? lo : x[i];
        y[i] = hi < v ? hi : v;
      }
      return Status::ok();
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      if (op_ == UnOp::kSign) {
        for (int64_t i = 0; i < n_; ++i)
          y[i] = (x[i] > 0) - (x[i] < 0);
        return Status::ok();
      }
      // Neg and Abs wrap like two's complement (INT64_MIN stays INT64_MIN), as numpy.
      for (int64_t i = 0; i < n_; ++i) {
        uint64_t u = static_cast<uint64_t>(x[i]);
        bool negate = op_ == UnOp::kNeg || x[i] < 0;
        y[i] = static_cast<int64_t>(negate ? 0 - u : u);
      }
    } else {
      switch (op_) {
      case UnOp::kNeg:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = -x[i];
        break;
      case UnOp::kReciprocal:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = 1.f / x[i];
        break;
      case UnOp::kLog:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::log(x[i]);
        break;
      case UnOp::kErf:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::erf(x[i]);
        break;
      case UnOp::kFloor:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::floor(x[i]);
        break;
      case UnOp::kCeil:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::ceil(x[i]);
        break;
      case UnOp::kRound:
        // Halves to even (the default rounding mode), as ONNX Round and numpy.round.
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::nearbyint(x[i]);
        break;
      case UnOp::kSign:
        // NaN stays NaN, as numpy.sign.
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::isnan(x[i]) ? x[i] : static_cast<float>((x[i] > 0.f) - (x[i] < 0.f));
        break;
      case UnOp::kHardSigmoid:
        // max(0, min(1, alpha * x + beta)); NaN stays NaN.
        for (int64_t i = 0; i < n_; ++i) {
          float v = alpha_ * x[i] + beta_;
          v = 1.f < v ? 1.f : v;
          y[i] = v < 0.f ? 0.f : v;
        }
        break;
      case UnOp::kSoftplus:
        // log1p(e^x) without overflow. A loop: oneDNN 2.6's soft_relu loses relative accuracy
        // for negative x (1.3% near x = -9.5 in ONNX's test_mish_expanded).
        for (int64_t i = 0; i < n_; ++i)
          y[i] = x[i] > 0.f ? x[i] + std::log1p(std::exp(-x[i])) : std::log1p(std::exp(x[i]));
        break;
      case UnOp::kSoftsign:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = x[i] / (1.f + std::fabs(x[i]));
        break;
      case UnOp::kSelu: // gamma (x > 0 ? x : alpha (e^x - 1)); gamma is beta_
        for (int64_t i = 0; i < n_; ++i)
          y[i] = beta_ * (x[i] > 0.f ? x[i] : alpha_ * std::expm1(x[i]));
        break;
      case UnOp::kCelu: // max(0, x) + min(0, alpha (e^(x / alpha) - 1)); NaN stays NaN
        for (int64_t i = 0; i < n_; ++i)
          y[i] = x[i] > 0.f ? x[i] : alpha_ * std::expm1(x[i] / alpha_);
        break;
      case UnOp::kSin:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::sin(x[i]);
        break;
      case UnOp::kCos:
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::cos(x[i]);
        break;
      default: // the oneDNN ops never reach the loop in f32; Abs does in i64 only
        for (int64_t i = 0; i < n_; ++i)
          y[i] = std::fabs(x[i]);
        break;
      }
    }
    return Status::ok();
  }

  UnOp op_;
  ir::DType dtype_;
  int64_t n_;
  float alpha_ = 0.f, beta_ = 0.f;
};

/// Pow: out[i] = base[ib(i)] ** exponent[ie(i)] (std::pow; an i64 exponent is applied in double
/// with the sign taken from its parity, so a negative base with an odd exponent stays negative).
/// Reads both operands of element i before writing it: correct in place on an operand of the
/// output's shape and dtype.
class PowKernel : public Kernel {
public:
  explicit PowKernel(const KernelSpec &spec)
      : intExponent_(spec.inputs[1].dtype == ir::DType::kInt64),
        scalarExponent_(spec.inputs[1].numElements() == 1 &&
                        spec.inputs[0].shape == spec.outputs[0].shape),
        n_(spec.outputs[0].numElements()),
        loop_(spec.outputs[0].shape, {spec.inputs[0].shape, spec.inputs[1].shape}) {}

  Status run(const KernelArgs &args) override {
    const float *x = static_cast<const float *>(args.inputs[0]);
    float *z = static_cast<float *>(args.outputs[0]);
    if (intExponent_) {
      const int64_t *e = static_cast<const int64_t *>(args.inputs[1]);
      loop_.run([&](int64_t o, const std::array<int64_t, 2> &i) {
        // |x| ** e in double, negated for a negative base (or -0) and an odd exponent: exact in
        // sign for every int64 e (e as a double may round to an even number above 2^53).
        double mag =
            std::pow(std::fabs(static_cast<double>(x[i[0]])), static_cast<double>(e[i[1]]));
        bool odd = (e[i[1]] & 1) != 0;
        z[o] = static_cast<float>(std::signbit(x[i[0]]) && odd ? -mag : mag);
      });
      return Status::ok();
    }
    const float *e = static_cast<const float *>(args.inputs[1]);
    if (scalarExponent_) {
      // Fast path: a scalar exponent with base of the output's shape; x*x is pow(x, 2) exactly
      // (both are correctly rounded).
      const float p = e[0];
      if (p == 2.f) {
        for (int64_t o = 0; o < n_; ++o)
          z[o] = x[o] * x[o];
      } else {
        for (int64_t o = 0; o < n_; ++o)
          z[o] = std::pow(x[o], p);
      }
      return Status::ok();
    }
    loop_.run(
        [&](int64_t o, const std::array<int64_t, 2> &i) { z[o] = std::pow(x[i[0]], e[i[1]]); });
    return Status::ok();
  }

private:
  bool intExponent_;
  bool scalarExponent_; ///< one exponent element and a base of the output's shape
  int64_t n_;
  BroadcastLoop<2> loop_;
};

} // namespace

Status checkUnary(const KernelSpec &spec) {
  UnOp op = unOp(spec.op);
  bool clip = op == UnOp::kClip;
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, clip ? 3 : 1, 1));
  if (clip || op == UnOp::kNeg || op == UnOp::kAbs || op == UnOp::kSign)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32, ir::DType::kInt64}));
  else
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  DTC_RETURN_IF_ERROR(checkFlatLayout(spec));
  for (size_t i = 1; i < spec.inputs.size(); ++i) {
    if (!spec.inputs[i].present())
      continue;
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {spec.inputs[0].dtype}));
    if (spec.inputs[i].numElements() != 1)
      return spec.error("input " + std::to_string(i) + " (" + (i == 1 ? "min" : "max") +
                        ") has shape " + shapeStr(spec.inputs[i].shape) + "; expected a scalar");
  }
  if (op == UnOp::kGelu) {
    std::string approximate = spec.attrString("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return spec.error("attribute 'approximate' must be \"none\" or \"tanh\", got \"" +
                        approximate + "\"");
  }
  return Status::ok();
}

Expected<KernelPtr> createUnary(const KernelSpec &spec, CpuContext &ctx) {
  UnOp op = unOp(spec.op);
  dnnl::algorithm alg;
  float alpha;
  if (spec.inputs[0].dtype != ir::DType::kFloat32 || !eltwiseAlgorithm(spec, op, alg, alpha))
    return KernelPtr(std::make_unique<UnaryLoopKernel>(spec));
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc md = plainDesc(spec.inputs[0].shape);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, 0.f);
    dnnl::eltwise_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::eltwise_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, md, 0);
    r.output(DNNL_ARG_DST, md, 0);
    KernelPtr k = std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
    // oneDNN's exp gives +inf for NaN, its relu with alpha 0 (LeakyRelu alpha=0) gives 0: those
    // scan for NaN, and so do the exp-based elu and mish. The other algorithms keep NaN
    // themselves.
    if (alg == dnnl::algorithm::eltwise_exp || alg == dnnl::algorithm::eltwise_elu ||
        alg == dnnl::algorithm::eltwise_mish ||
        (alg == dnnl::algorithm::eltwise_relu && alpha == 0.f))
      return propagateNanElementwise(std::move(k), spec.inputs[0].numElements());
    return k;
  });
}

int inPlaceUnary(const KernelSpec &) { return 0; }

Status checkPow(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kFloat32, ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  std::vector<int64_t> out;
  if (!broadcastShapes(spec.inputs[0].shape, spec.inputs[1].shape, out))
    return spec.error("input shapes " + shapeStr(spec.inputs[0].shape) + " and " +
                      shapeStr(spec.inputs[1].shape) + " do not broadcast");
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createPow(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<PowKernel>(spec));
}

int inPlacePow(const KernelSpec &spec) {
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[0].shape == out)
    return 0;
  if (spec.inputs[1].shape == out && spec.inputs[1].dtype == ir::DType::kFloat32)
    return 1;
  return -1;
}

} // namespace dtc::ops::cpu
