// CPU kernels of the ai.dtc optimizer ops (definitions and formulas: ops/training/Optimizer.cpp):
// SGD, Adam, AdamW as one elementwise pass over each parameter (every element read before it is
// written, so outputs may share the bytes of their state inputs), SumSquares, ClipGradNormScale
// and ZeroGradient. Loops over large tensors are split over OpenMP threads when built with it.
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dtc::ops::cpu {

namespace {

/// Elements below which a loop stays on one thread (thread start-up costs more than the work).
constexpr int64_t kParallelGrain = 1 << 15;

enum class Algo { kSgd, kAdam, kAdamW };

Algo algoOf(const KernelSpec &spec) {
  return spec.op == "SGD" ? Algo::kSgd : spec.op == "Adam" ? Algo::kAdam : Algo::kAdamW;
}

class OptimizerKernel : public Kernel {
public:
  explicit OptimizerKernel(const KernelSpec &spec)
      : algo_(algoOf(spec)), n_(spec.inputs[0].numElements()),
        momentum_(spec.attrFloat("momentum", 0.f)), nesterov_(spec.attrInt("nesterov", 0) != 0),
        weightDecay_(spec.attrFloat("weight_decay", 0.f)), beta1_(spec.attrFloat("beta1", 0.9f)),
        beta2_(spec.attrFloat("beta2", 0.999f)), eps_(spec.attrFloat("epsilon", 1e-8f)) {
    scaleIndex_ = algo_ == Algo::kSgd ? 4 : 6;
  }

  Status run(const KernelArgs &args) override {
    const float lr = *static_cast<const float *>(args.inputs[2]);
    const float *scalePtr = args.numInputs > scaleIndex_
                                ? static_cast<const float *>(args.inputs[scaleIndex_])
                                : nullptr;
    const float scale = scalePtr ? *scalePtr : 1.f;
    if (algo_ == Algo::kSgd)
      runSgd(args, lr, scale);
    else
      runAdam(args, lr, scale, *static_cast<const int64_t *>(args.inputs[3]));
    return Status::ok();
  }

private:
  // torch 1.13 _single_tensor_sgd with dampening 0. `p` and `po` (and `b`, `bo`) may alias.
  void runSgd(const KernelArgs &args, float lr, float scale) const {
    const float *p = static_cast<const float *>(args.inputs[0]);
    const float *g = static_cast<const float *>(args.inputs[1]);
    float *po = static_cast<float *>(args.outputs[0]);
    const float negLr = -lr, wd = weightDecay_, mu = momentum_;
    if (mu == 0.f) {
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const float pi = p[i];
        const float d = g[i] * scale + wd * pi;
        po[i] = pi + negLr * d;
      }
      return;
    }
    const float *b = static_cast<const float *>(args.inputs[3]);
    float *bo = static_cast<float *>(args.outputs[1]);
    if (nesterov_) {
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const float pi = p[i];
        const float d = g[i] * scale + wd * pi;
        const float buf = b[i] * mu + d;
        bo[i] = buf;
        po[i] = pi + negLr * (d + mu * buf);
      }
    } else {
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const float pi = p[i];
        const float d = g[i] * scale + wd * pi;
        const float buf = b[i] * mu + d;
        bo[i] = buf;
        po[i] = pi + negLr * buf;
      }
    }
  }

  // torch 1.13 _single_tensor_adam / _single_tensor_adamw (amsgrad off). The bias corrections
  // are computed in double, as PyTorch does in Python, then used as f32 scalars.
  void runAdam(const KernelArgs &args, float lr, float scale, int64_t step) const {
    const float *p = static_cast<const float *>(args.inputs[0]);
    const float *g = static_cast<const float *>(args.inputs[1]);
    const float *m = static_cast<const float *>(args.inputs[4]);
    const float *v = static_cast<const float *>(args.inputs[5]);
    float *po = static_cast<float *>(args.outputs[0]);
    float *mo = static_cast<float *>(args.outputs[1]);
    float *vo = static_cast<float *>(args.outputs[2]);
    const double t = static_cast<double>(step) + 1.0;
    const double bc1 = 1.0 - std::pow(static_cast<double>(beta1_), t);
    const double bc2 = 1.0 - std::pow(static_cast<double>(beta2_), t);
    const float negStepSize = static_cast<float>(-static_cast<double>(lr) / bc1);
    const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
    const float b1 = beta1_, b2 = beta2_, eps = eps_;
    const float oneMinusB1 = static_cast<float>(1.0 - static_cast<double>(beta1_));
    const float oneMinusB2 = static_cast<float>(1.0 - static_cast<double>(beta2_));
    if (algo_ == Algo::kAdamW) {
      const float decay =
          static_cast<float>(1.0 - static_cast<double>(lr) * static_cast<double>(weightDecay_));
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n_; ++i) {
        const float pi = p[i] * decay;
        const float gi = g[i] * scale;
        const float mi = m[i] * b1 + oneMinusB1 * gi;
        const float vi = v[i] * b2 + oneMinusB2 * gi * gi;
        mo[i] = mi;
        vo[i] = vi;
        po[i] = pi + negStepSize * (mi / (std::sqrt(vi) / bc2Sqrt + eps));
      }
      return;
    }
    const float wd = weightDecay_;
#pragma omp parallel for if (n_ >= kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n_; ++i) {
      const float pi = p[i];
      const float gi = g[i] * scale + wd * pi;
      const float mi = m[i] * b1 + oneMinusB1 * gi;
      const float vi = v[i] * b2 + oneMinusB2 * gi * gi;
      mo[i] = mi;
      vo[i] = vi;
      po[i] = pi + negStepSize * (mi / (std::sqrt(vi) / bc2Sqrt + eps));
    }
  }

  Algo algo_;
  int64_t n_;
  float momentum_;
  bool nesterov_;
  float weightDecay_, beta1_, beta2_, eps_;
  size_t scaleIndex_;
};

/// Sum of x[i]^2 over [0, n): 16 independent f32 lanes (vectorizable) per block of 4096
/// elements, blocks added in double, so the rounding error stays near f32 epsilon for any n.
double sumSquares(const float *x, int64_t n) {
  constexpr int64_t kLanes = 16, kBlock = 4096;
  double total = 0.0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    float lanes[kLanes] = {};
    int64_t i = start;
    for (; i + kLanes <= end; i += kLanes)
      for (int64_t l = 0; l < kLanes; ++l)
        lanes[l] += x[i + l] * x[i + l];
    double block = 0.0;
    for (; i < end; ++i)
      block += static_cast<double>(x[i]) * x[i];
    for (float l : lanes)
      block += l;
    total += block;
  }
  return total;
}

class SumSquaresKernel : public Kernel {
public:
  explicit SumSquaresKernel(const KernelSpec &spec) {
    for (const TensorDesc &t : spec.inputs)
      sizes_.push_back(t.numElements());
  }
  Status run(const KernelArgs &args) override {
    double total = 0.0;
    for (size_t k = 0; k < sizes_.size(); ++k) {
      const float *x = static_cast<const float *>(args.inputs[k]);
      const int64_t n = sizes_[k];
      if (n < 2 * kParallelGrain) {
        total += sumSquares(x, n);
        continue;
      }
      const int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
      double part = 0.0;
#pragma omp parallel for reduction(+ : part) schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * kParallelGrain;
        part += sumSquares(x + begin, std::min(kParallelGrain, n - begin));
      }
      total += part;
    }
    *static_cast<float *>(args.outputs[0]) = static_cast<float>(total);
    return Status::ok();
  }

private:
  std::vector<int64_t> sizes_;
};

class ClipGradNormScaleKernel : public Kernel {
public:
  explicit ClipGradNormScaleKernel(const KernelSpec &spec)
      : maxNorm_(spec.attrFloat("max_norm", 1.f)), inputScale_(spec.attrFloat("input_scale", 1.f)),
        numInputs_(spec.inputs.size()) {}
  Status run(const KernelArgs &args) override {
    double sum = 0.0;
    for (size_t k = 0; k < numInputs_; ++k)
      sum += *static_cast<const float *>(args.inputs[k]);
    const double norm = static_cast<double>(inputScale_) * std::sqrt(sum);
    double coef = static_cast<double>(maxNorm_) / (norm + 1e-6);
    coef = std::isnan(coef) ? coef : std::min(coef, 1.0); // NaN stays NaN, as torch.clamp
    *static_cast<float *>(args.outputs[0]) = static_cast<float>(inputScale_ * coef);
    return Status::ok();
  }

private:
  float maxNorm_, inputScale_;
  size_t numInputs_;
};

class ZeroGradientKernel : public Kernel {
public:
  explicit ZeroGradientKernel(const KernelSpec &spec) : bytes_(spec.outputs[0].byteSize()) {}
  Status run(const KernelArgs &args) override {
    if (bytes_ > 0)
      std::memset(args.outputs[0], 0, static_cast<size_t>(bytes_));
    return Status::ok();
  }

private:
  int64_t bytes_;
};

Status checkScalar(const KernelSpec &spec, size_t index, const std::string &what) {
  if (spec.inputs[index].numElements() != 1)
    return spec.error(what + " (input " + std::to_string(index) + ") must hold one element, got " +
                      shapeStr(spec.inputs[index].shape));
  return Status::ok();
}

Status checkLikeParam(const KernelSpec &spec, bool input, size_t index, const std::string &what) {
  const TensorDesc &t = input ? spec.inputs[index] : spec.outputs[index];
  DTC_RETURN_IF_ERROR(checkDType(spec, input, index, {ir::DType::kFloat32}));
  if (t.shape != spec.inputs[0].shape)
    return spec.error(what + " has shape " + shapeStr(t.shape) + ", the parameter " +
                      shapeStr(spec.inputs[0].shape));
  return Status::ok();
}

} // namespace

Status checkOptimizer(const KernelSpec &spec) {
  const Algo algo = algoOf(spec);
  if (algo == Algo::kSgd) {
    const bool withMomentum = spec.attrFloat("momentum", 0.f) != 0.f;
    DTC_RETURN_IF_ERROR(checkArity(spec, withMomentum ? 4 : 3, 5, withMomentum ? 2 : 1));
    if (withMomentum)
      DTC_RETURN_IF_ERROR(checkLikeParam(spec, true, 3, "momentum (input 3)"));
    else if (spec.inputs.size() > 3 && spec.inputs[3].present())
      return spec.error("momentum is 0 but the momentum input is present");
  } else {
    DTC_RETURN_IF_ERROR(checkArity(spec, 6, 7, 3));
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 3, {ir::DType::kInt64}));
    DTC_RETURN_IF_ERROR(checkScalar(spec, 3, "step"));
    DTC_RETURN_IF_ERROR(checkLikeParam(spec, true, 4, "exp_avg (input 4)"));
    DTC_RETURN_IF_ERROR(checkLikeParam(spec, true, 5, "exp_avg_sq (input 5)"));
  }
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkLikeParam(spec, true, 1, "grad (input 1)"));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 2, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkScalar(spec, 2, "lr"));
  const size_t scaleIndex = algo == Algo::kSgd ? 4 : 6;
  if (spec.inputs.size() > scaleIndex && spec.inputs[scaleIndex].present()) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, scaleIndex, {ir::DType::kFloat32}));
    DTC_RETURN_IF_ERROR(checkScalar(spec, scaleIndex, "grad_scale"));
  }
  for (size_t o = 0; o < spec.outputs.size(); ++o)
    DTC_RETURN_IF_ERROR(checkLikeParam(spec, false, o, "output " + std::to_string(o)));
  return Status::ok();
}

Expected<KernelPtr> createOptimizer(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<OptimizerKernel>(spec));
}

// param_out may overwrite param (and each state output its state input: see the op comments).
int inPlaceOptimizer(const KernelSpec &) { return 0; }

Status checkSumSquares(const KernelSpec &spec) {
  if (spec.inputs.empty())
    return spec.error("expected at least one input");
  DTC_RETURN_IF_ERROR(checkArity(spec, spec.inputs.size(), spec.inputs.size(), 1));
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  return checkOutputShape(spec, {});
}

Expected<KernelPtr> createSumSquares(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<SumSquaresKernel>(spec));
}

Status checkClipGradNormScale(const KernelSpec &spec) {
  if (spec.inputs.empty())
    return spec.error("expected at least one input");
  DTC_RETURN_IF_ERROR(checkArity(spec, spec.inputs.size(), spec.inputs.size(), 1));
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
    DTC_RETURN_IF_ERROR(checkScalar(spec, i, "sum_squares"));
  }
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, {}));
  const float maxNorm = spec.attrFloat("max_norm", 0.f);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  if (!(maxNorm > 0.f))
    return spec.error("max_norm must be > 0");
  return Status::ok();
}

Expected<KernelPtr> createClipGradNormScale(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<ClipGradNormScaleKernel>(spec));
}

Status checkZeroGradient(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  return checkOutputShape(spec, spec.inputs[0].shape);
}

Expected<KernelPtr> createZeroGradient(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<ZeroGradientKernel>(spec));
}

int inPlaceZeroGradient(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
