// CPU kernels of the loss gradients ai.dtc.SoftmaxCrossEntropyLossGrad and
// ai.dtc.NegativeLogLikelihoodLossGrad (formulas in their OpDefs, ops/training/TensorGrad*.cpp,
// as PyTorch's cross_entropy / nll_loss backward). Softmax by oneDNN, then hand loops over
// (N, C, D), D = d1 * ... * dk: rows of C contiguous classes when D = 1 (classification, language
// models), else C planes of D contiguous positions (segmentation), walking memory in order.
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace dtc::ops::cpu {

namespace {

/// The per-sample factors g(n, j) * w[y] shared by both kernels: 0 for ignored labels, dloss
/// (none), dloss (sum) or dloss / (sum of applied weights) (mean). Errors on labels outside
/// [0, C) that are not ignore_index.
class LossGradScale {
public:
  explicit LossGradScale(const KernelSpec &spec, size_t labelsInput, size_t weightsInput)
      : where_(spec.where()), reduction_(spec.attrString("reduction", "mean")),
        hasIgnore_(spec.attrs.count("ignore_index") > 0), ignore_(spec.attrInt("ignore_index", 0)),
        labels32_(spec.inputs[labelsInput].dtype == ir::DType::kInt32), labelsInput_(labelsInput),
        weightsInput_(weightsInput) {
    count_ = spec.inputs[labelsInput].numElements();
    scale_.resize(static_cast<size_t>(count_));
    labels_.resize(static_cast<size_t>(count_));
  }

  /// Fills labels() (normalized to int64; -1 for ignored) and scales() from the run's operands
  /// (an omitted weights input is a null pointer or past numInputs).
  Status compute(const KernelArgs &args, int64_t numClasses, int64_t perSample) {
    const void *lab = args.inputs[labelsInput_];
    const float *w = args.numInputs > weightsInput_
                         ? static_cast<const float *>(args.inputs[weightsInput_])
                         : nullptr;
    const float *dl = static_cast<const float *>(args.inputs[0]);
    double weightSum = 0.0;
    for (int64_t i = 0; i < count_; ++i) {
      int64_t y =
          labels32_ ? static_cast<const int32_t *>(lab)[i] : static_cast<const int64_t *>(lab)[i];
      if (hasIgnore_ && y == ignore_) {
        labels_[i] = -1;
        scale_[i] = 0.f;
        continue;
      }
      if (y < 0 || y >= numClasses)
        return Status::error(where_, "label " + std::to_string(y) + " at sample " +
                                         std::to_string(i / perSample) + " is out of range [0, " +
                                         std::to_string(numClasses) + ")" +
                                         (hasIgnore_ ? " and is not ignore_index" : ""));
      labels_[i] = y;
      const float wt = w ? w[y] : 1.f;
      weightSum += wt;
      scale_[i] = reduction_ == "none" ? wt * dl[i] : wt;
    }
    if (reduction_ != "none") {
      // mean: 0 / 0 (every weight zero) gives NaN for non-ignored samples, as PyTorch does.
      const double g = reduction_ == "mean" ? static_cast<double>(dl[0]) / weightSum : dl[0];
      for (int64_t i = 0; i < count_; ++i)
        if (labels_[i] >= 0)
          scale_[i] = static_cast<float>(scale_[i] * g);
    }
    return Status::ok();
  }
  const std::vector<int64_t> &labels() const { return labels_; }
  const std::vector<float> &scales() const { return scale_; }

private:
  std::string where_;
  std::string reduction_;
  bool hasIgnore_;
  int64_t ignore_;
  bool labels32_;
  size_t labelsInput_, weightsInput_;
  int64_t count_ = 0;
  std::vector<float> scale_;
  std::vector<int64_t> labels_;
};

void shapeNCD(const std::vector<int64_t> &s, int64_t &n, int64_t &c, int64_t &d) {
  n = s[0];
  c = s[1];
  d = 1;
  for (size_t i = 2; i < s.size(); ++i)
    d *= s[i];
}

// dscores = scale * (softmax - onehot) + dlp - softmax * sum(dlp). Inputs: 0 dloss, 1 scores,
// 2 labels, 3 weights?, 4 dlog_prob?. The softmax is one oneDNN softmax_v2 primitive over the
// class axis of (N, C, D) (vectorized, threaded); a second pass scales it per sample and
// subtracts at the label. dscores may alias scores (in place; oneDNN's softmax allows it).
class SceGradKernel : public Kernel {
public:
  SceGradKernel(const KernelSpec &spec, CpuContext &ctx, PrimitiveRunner softmax)
      : where_(spec.where()), ctx_(ctx), softmax_(std::move(softmax)), scale_(spec, 2, 3),
        hasDlp_(spec.inputs.size() > 4 && spec.inputs[4].present()) {
    shapeNCD(spec.inputs[1].shape, n_, c_, d_);
    if (d_ > 1)
      coef_.resize(static_cast<size_t>(d_));
  }

  Status run(const KernelArgs &args) override {
    DTC_RETURN_IF_ERROR(scale_.compute(args, c_, d_));
    if (d_ > 1) {
      planeSoftmax(static_cast<const float *>(args.inputs[1]),
                   static_cast<float *>(args.outputs[0]));
    } else {
      try {
        softmax_.execute(args);
        ctx_.stream.wait();
      } catch (const dnnl::error &e) {
        return Status::error(where_, std::string("oneDNN: ") + e.what());
      }
    }
    const float *dlp = hasDlp_ ? static_cast<const float *>(args.inputs[4]) : nullptr;
    float *dx = static_cast<float *>(args.outputs[0]);
    const std::vector<float> &sc = scale_.scales();
    const std::vector<int64_t> &lab = scale_.labels();
    const int64_t block = c_ * d_;
    for (int64_t n = 0; n < n_; ++n) {
      const float *l = dlp ? dlp + n * block : nullptr;
      if (d_ == 1)
        row(l, dx + n * block, sc[n], lab[n]);
      else
        planes(l, dx + n * block, &sc[n * d_], &lab[n * d_]);
    }
    return Status::ok();
  }

private:
  /// Softmax over the class axis of (N, C, D) scores with D > 1, vectorized over the D
  /// positions (oneDNN 2.6 runs a strided class axis on its slow reference code). `dx` may be
  /// `x` (each element is read before it is written).
  void planeSoftmax(const float *x, float *dx) {
    const int64_t d = d_;
    std::vector<float> &mx = coef_; // reused as scratch; planes() refills it
    sum_.resize(static_cast<size_t>(d));
    for (int64_t n = 0; n < n_; ++n) {
      const float *xs = x + n * c_ * d;
      float *o = dx + n * c_ * d;
      std::copy(xs, xs + d, mx.begin());
      for (int64_t c = 1; c < c_; ++c)
        for (int64_t j = 0; j < d; ++j)
          mx[j] = std::max(mx[j], xs[c * d + j]);
      std::fill(sum_.begin(), sum_.end(), 0.f);
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t j = 0; j < d; ++j) {
          const float e = std::exp(xs[c * d + j] - mx[j]);
          o[c * d + j] = e;
          sum_[j] += e;
        }
      for (int64_t j = 0; j < d; ++j)
        sum_[j] = 1.f / sum_[j];
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t j = 0; j < d; ++j)
          o[c * d + j] *= sum_[j];
    }
  }

  /// dx holds softmax(scores) of one sample (C contiguous classes).
  void row(const float *dlp, float *dx, float scale, int64_t y) const {
    float coef = scale;
    if (dlp) {
      float sd = 0.f;
      for (int64_t c = 0; c < c_; ++c)
        sd += dlp[c];
      coef -= sd;
      for (int64_t c = 0; c < c_; ++c)
        dx[c] = dx[c] * coef + dlp[c];
    } else {
      for (int64_t c = 0; c < c_; ++c)
        dx[c] *= coef;
    }
    if (y >= 0)
      dx[y] -= scale;
  }

  /// dx holds softmax(scores) of one sample as C planes of D positions.
  void planes(const float *dlp, float *dx, const float *scale, const int64_t *y) {
    const int64_t d = d_;
    std::copy(scale, scale + d, coef_.begin());
    if (dlp) {
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t j = 0; j < d; ++j)
          coef_[j] -= dlp[c * d + j];
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t j = 0; j < d; ++j)
          dx[c * d + j] = dx[c * d + j] * coef_[j] + dlp[c * d + j];
    } else {
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t j = 0; j < d; ++j)
          dx[c * d + j] *= coef_[j];
    }
    for (int64_t j = 0; j < d; ++j)
      if (y[j] >= 0)
        dx[y[j] * d + j] -= scale[j];
  }

  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner softmax_;
  std::vector<float> sum_;
  LossGradScale scale_;
  bool hasDlp_;
  int64_t n_ = 0, c_ = 0, d_ = 1;
  std::vector<float> coef_;
};

// dinput = -scale at the target class, 0 elsewhere. Inputs: 0 dloss, 1 target, 2 weight?.
class NllGradKernel : public Kernel {
public:
  explicit NllGradKernel(const KernelSpec &spec)
      : scale_(spec, 1, 2), bytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {
    shapeNCD(spec.outputs[0].shape, n_, c_, d_);
  }

  Status run(const KernelArgs &args) override {
    DTC_RETURN_IF_ERROR(scale_.compute(args, c_, d_));
    float *dx = static_cast<float *>(args.outputs[0]);
    std::memset(dx, 0, bytes_);
    const std::vector<float> &sc = scale_.scales();
    const std::vector<int64_t> &lab = scale_.labels();
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t j = 0; j < d_; ++j) {
        const int64_t i = n * d_ + j;
        if (lab[i] >= 0)
          dx[(n * c_ + lab[i]) * d_ + j] = -sc[i];
      }
    return Status::ok();
  }

private:
  LossGradScale scale_;
  size_t bytes_;
  int64_t n_ = 0, c_ = 0, d_ = 1;
};

/// Shared checks: reduction, dloss's shape, labels (N, d1..dk), weights (C). `shape` is the
/// scores' / input's shape (N, C, d1..dk).
Status checkLossGradOperands(const KernelSpec &spec, const std::vector<int64_t> &shape,
                             size_t labelsInput, size_t weightsInput) {
  const std::string reduction = spec.attrString("reduction", "mean");
  if (reduction != "none" && reduction != "mean" && reduction != "sum")
    return spec.error("reduction must be none, mean or sum, got '" + reduction + "'");
  if (shape.size() < 2)
    return spec.error("scores must have shape (N, C, d1..dk), got " + shapeStr(shape));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, labelsInput, {ir::DType::kInt64, ir::DType::kInt32}));
  std::vector<int64_t> perSample = shape;
  perSample.erase(perSample.begin() + 1);
  if (spec.inputs[labelsInput].shape != perSample)
    return spec.error("labels " + shapeStr(spec.inputs[labelsInput].shape) + " must have shape " +
                      shapeStr(perSample));
  const std::vector<int64_t> dloss = reduction == "none" ? perSample : std::vector<int64_t>{};
  if (spec.inputs[0].shape != dloss)
    return spec.error("dloss " + shapeStr(spec.inputs[0].shape) + " must have shape " +
                      shapeStr(dloss) + " for reduction " + reduction);
  if (spec.inputs.size() > weightsInput && spec.inputs[weightsInput].present()) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, weightsInput, {ir::DType::kFloat32}));
    if (spec.inputs[weightsInput].shape != std::vector<int64_t>{shape[1]})
      return spec.error("weights " + shapeStr(spec.inputs[weightsInput].shape) +
                        " must have shape [" + std::to_string(shape[1]) + "]");
  }
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  return checkOutputShape(spec, shape);
}

} // namespace

Status checkSoftmaxCrossEntropyLossGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 3, 5, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kFloat32}));
  const std::vector<int64_t> &shape = spec.inputs[1].shape;
  if (spec.inputs.size() > 4 && spec.inputs[4].present()) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 4, {ir::DType::kFloat32}));
    if (spec.inputs[4].shape != shape)
      return spec.error("dlog_prob " + shapeStr(spec.inputs[4].shape) + " must have shape " +
                        shapeStr(shape));
  }
  return checkLossGradOperands(spec, shape, 2, 3);
}

Expected<KernelPtr> createSoftmaxCrossEntropyLossGrad(const KernelSpec &spec, CpuContext &ctx) {
  return buildKernel(spec, [&]() -> KernelPtr {
    int64_t n, c, d;
    shapeNCD(spec.inputs[1].shape, n, c, d);
    PrimitiveRunner runner;
    if (n * c * d > 0 && d == 1) { // D > 1: the kernel's own loop (see planeSoftmax)
      const dnnl::memory::desc md =
          plainDesc(d == 1 ? std::vector<int64_t>{n, c} : std::vector<int64_t>{n, c, d});
      dnnl::softmax_v2_forward::desc sd(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::softmax_accurate, md, md, 1);
      dnnl::softmax_v2_forward::primitive_desc pd(sd, ctx.engine);
      runner = PrimitiveRunner(dnnl::softmax_v2_forward(pd), ctx);
      runner.input(DNNL_ARG_SRC, md, 1);
      runner.output(DNNL_ARG_DST, md, 0);
    }
    return std::make_unique<SceGradKernel>(spec, ctx, std::move(runner));
  });
}

int inPlaceSoftmaxCrossEntropyLossGrad(const KernelSpec &) { return 1; }

Status checkNegativeLogLikelihoodLossGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1));
  return checkLossGradOperands(spec, spec.outputs[0].shape, 1, 2);
}

Expected<KernelPtr> createNegativeLogLikelihoodLossGrad(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<NllGradKernel>(spec));
}

} // namespace dtc::ops::cpu
