// CPU kernels of ai.dtc.EltwiseGrad and ai.dtc.ClipGrad (ops/training/ActivationGradOps.cpp),
// f32. EltwiseGrad runs one oneDNN eltwise_backward primitive (relu, the *_use_dst_for_bwd
// forms, log, abs, gelu_erf, gelu_tanh, soft_relu, elu, mish) or, where oneDNN 2.6 has no
// backward or another convention (erf, reciprocal_dst, hardswish, hardsigmoid, softsign, selu,
// celu, sin, cos), a hand loop; ClipGrad is a loop (its
// bounds are run-time inputs). Every operand shares one layout (a flat elementwise op), and dX
// may overwrite dY in place. The loops split over OpenMP threads when built with it.
#include "ops/cpu/OneDnnUtil.h"

#include <cmath>
#include <limits>

namespace dtc::ops::cpu {

namespace {

/// Elements below which the hand loops stay on one thread.
constexpr int64_t kParallelGrain = 1 << 15;

enum class LoopAlg {
  kNone,
  kErf,
  kReciprocalDst,
  kHardSwish,
  kHardSigmoid,
  kSoftsign,
  kSelu,
  kCelu,
  kSin,
  kCos
};

/// The oneDNN algorithm of `name` (true), or the hand loop (false, `loop` set); error for an
/// unknown name.
Status eltwiseGradAlgorithm(const KernelSpec &spec, dnnl::algorithm &alg, LoopAlg &loop) {
  static const std::pair<const char *, dnnl::algorithm> kDnnl[] = {
      {"relu", dnnl::algorithm::eltwise_relu},
      {"relu_dst", dnnl::algorithm::eltwise_relu_use_dst_for_bwd},
      {"logistic_dst", dnnl::algorithm::eltwise_logistic_use_dst_for_bwd},
      {"tanh_dst", dnnl::algorithm::eltwise_tanh_use_dst_for_bwd},
      {"exp_dst", dnnl::algorithm::eltwise_exp_use_dst_for_bwd},
      {"sqrt_dst", dnnl::algorithm::eltwise_sqrt_use_dst_for_bwd},
      {"log", dnnl::algorithm::eltwise_log},
      {"abs", dnnl::algorithm::eltwise_abs},
      {"gelu_erf", dnnl::algorithm::eltwise_gelu_erf},
      {"gelu_tanh", dnnl::algorithm::eltwise_gelu_tanh},
      {"soft_relu", dnnl::algorithm::eltwise_soft_relu},
      {"elu", dnnl::algorithm::eltwise_elu},
      {"mish", dnnl::algorithm::eltwise_mish},
  };
  static const std::pair<const char *, LoopAlg> kLoops[] = {
      {"erf", LoopAlg::kErf},
      {"reciprocal_dst", LoopAlg::kReciprocalDst},
      {"hardswish", LoopAlg::kHardSwish},
      {"hardsigmoid", LoopAlg::kHardSigmoid},
      {"softsign", LoopAlg::kSoftsign},
      {"selu", LoopAlg::kSelu},
      {"celu", LoopAlg::kCelu},
      {"sin", LoopAlg::kSin},
      {"cos", LoopAlg::kCos},
  };
  const std::string name = spec.attrString("algorithm", "");
  loop = LoopAlg::kNone;
  for (const auto &[n, a] : kDnnl)
    if (name == n) {
      alg = a;
      return Status::ok();
    }
  for (const auto &[n, l] : kLoops)
    if (name == n) {
      loop = l;
      return Status::ok();
    }
  return spec.error("unknown algorithm '" + name + "'");
}

/// dX[i] = f(dY[i], T[i]) for the algorithms oneDNN lacks (formulas in ActivationGradOps.cpp).
/// Reads element i of both inputs before writing it: correct in place.
class EltwiseGradLoopKernel : public Kernel {
public:
  EltwiseGradLoopKernel(const KernelSpec &spec, LoopAlg alg)
      : alg_(alg), n_(spec.inputs[0].numElements()), alpha_(spec.attrFloat("alpha", 0.f)),
        beta_(spec.attrFloat("beta", 0.f)) {}

  Status run(const KernelArgs &args) override {
    const float *dy = static_cast<const float *>(args.inputs[0]);
    const float *t = static_cast<const float *>(args.inputs[1]);
    float *dx = static_cast<float *>(args.outputs[0]);
    switch (alg_) {
    case LoopAlg::kErf: {
      const float k = 1.1283791670955126f; // 2 / sqrt(pi)
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i)
        dx[i] = dy[i] * k * std::exp(-t[i] * t[i]);
      break;
    }
    case LoopAlg::kReciprocalDst:
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i)
        dx[i] = -dy[i] * (t[i] * t[i]);
      break;
    case LoopAlg::kHardSwish:
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const float x = t[i], g = dy[i];
        dx[i] = x < -3.f ? 0.f : (x <= 3.f ? g * (x / 3.f + 0.5f) : g);
      }
      break;
    case LoopAlg::kHardSigmoid:
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const float v = alpha_ * t[i] + beta_;
        dx[i] = v > 0.f && v < 1.f ? alpha_ * dy[i] : 0.f;
      }
      break;
    case LoopAlg::kSoftsign:
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const float d = 1.f + std::fabs(t[i]);
        dx[i] = dy[i] / (d * d);
      }
      break;
    case LoopAlg::kSelu: // alpha = Selu's alpha, beta = its gamma
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i)
        dx[i] = t[i] > 0.f ? beta_ * dy[i] : beta_ * alpha_ * std::exp(t[i]) * dy[i];
      break;
    case LoopAlg::kCelu:
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i)
        dx[i] = t[i] > 0.f ? dy[i] : std::exp(t[i] / alpha_) * dy[i];
      break;
    case LoopAlg::kSin:
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i)
        dx[i] = dy[i] * std::cos(t[i]);
      break;
    case LoopAlg::kCos:
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i)
        dx[i] = -dy[i] * std::sin(t[i]);
      break;
    case LoopAlg::kNone:
      break;
    }
    return Status::ok();
  }

private:
  LoopAlg alg_;
  int64_t n_;
  float alpha_, beta_;
};

/// ClipGrad: dX[i] = lo <= X[i] <= hi ? dY[i] : 0 (NaN X gives 0).
class ClipGradKernel : public Kernel {
public:
  explicit ClipGradKernel(const KernelSpec &spec) : n_(spec.inputs[0].numElements()) {}

  Status run(const KernelArgs &args) override {
    const float *dy = static_cast<const float *>(args.inputs[0]);
    const float *x = static_cast<const float *>(args.inputs[1]);
    float *dx = static_cast<float *>(args.outputs[0]);
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();
    if (args.numInputs > 2 && args.inputs[2])
      lo = *static_cast<const float *>(args.inputs[2]);
    if (args.numInputs > 3 && args.inputs[3])
      hi = *static_cast<const float *>(args.inputs[3]);
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n_; ++i)
      dx[i] = x[i] >= lo && x[i] <= hi ? dy[i] : 0.f;
    return Status::ok();
  }

private:
  int64_t n_;
};

/// Checks shared by both ops: f32 dY, T and dX of one shape and one layout.
Status checkGradPair(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  if (spec.inputs[1].shape != spec.inputs[0].shape)
    return spec.error("input 1 has shape " + shapeStr(spec.inputs[1].shape) + ", expected " +
                      shapeStr(spec.inputs[0].shape));
  DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, 0, true, 1));
  DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, 0, false, 0));
  return checkOutputShape(spec, spec.inputs[0].shape);
}

} // namespace

Status checkEltwiseGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkGradPair(spec));
  dnnl::algorithm alg;
  LoopAlg loop;
  DTC_RETURN_IF_ERROR(eltwiseGradAlgorithm(spec, alg, loop));
  if (spec.attrString("algorithm", "") == "relu_dst" && spec.attrFloat("alpha", 0.f) < 0.f)
    return spec.error("algorithm relu_dst needs alpha >= 0");
  return Status::ok();
}

Expected<KernelPtr> createEltwiseGrad(const KernelSpec &spec, CpuContext &ctx) {
  dnnl::algorithm alg = dnnl::algorithm::undef;
  LoopAlg loop = LoopAlg::kNone;
  DTC_RETURN_IF_ERROR(eltwiseGradAlgorithm(spec, alg, loop));
  if (loop != LoopAlg::kNone)
    return KernelPtr(std::make_unique<EltwiseGradLoopKernel>(spec, loop));
  const float alpha = spec.attrFloat("alpha", 0.f), beta = spec.attrFloat("beta", 0.f);
  const bool fromDst = spec.attrString("algorithm", "").find("_dst") != std::string::npos;
  return buildKernel(spec, [&]() -> KernelPtr {
    // One layout for every operand: the flat row-major view computes the same thing.
    dnnl::memory::desc md = plainDesc(spec.inputs[0].shape);
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, alg, md, alpha, beta);
    dnnl::eltwise_forward::primitive_desc fpd(fd, ctx.engine);
    dnnl::eltwise_backward::desc bd(alg, md, md, alpha, beta);
    dnnl::eltwise_backward::primitive_desc bpd(bd, ctx.engine, fpd);
    PrimitiveRunner r(dnnl::eltwise_backward(bpd), ctx);
    r.input(DNNL_ARG_DIFF_DST, md, 0);
    r.input(fromDst ? DNNL_ARG_DST : DNNL_ARG_SRC, md, 1);
    r.output(DNNL_ARG_DIFF_SRC, md, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

int inPlaceEltwiseGrad(const KernelSpec &) { return 0; }

Status checkClipGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 4, 1));
  DTC_RETURN_IF_ERROR(checkGradPair(spec));
  for (size_t i = 2; i < spec.inputs.size(); ++i) {
    if (!spec.inputs[i].present())
      continue;
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
    if (spec.inputs[i].numElements() != 1)
      return spec.error(std::string(i == 2 ? "min " : "max ") + shapeStr(spec.inputs[i].shape) +
                        " must be a scalar");
  }
  return Status::ok();
}

Expected<KernelPtr> createClipGrad(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<ClipGradKernel>(spec));
}

int inPlaceClipGrad(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
