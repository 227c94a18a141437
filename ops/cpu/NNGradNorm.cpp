// CPU kernels of the ai.dtc normalization ops of training graphs (ops/training/NNGradNorm.cpp):
// BatchNormTraining (oneDNN batch_normalization forward_training, then the running-statistics
// update), BatchNormGrad (oneDNN batch_normalization backward) and LayerNormGrad (statistics
// from a oneDNN layer_normalization forward_training, then its backward). f32, row-major.
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dtc::ops::cpu {

namespace {

using F = dnnl::normalization_flags;

bool present(const std::vector<TensorDesc> &v, size_t i) { return i < v.size() && v[i].present(); }

/// X (N, C, d1..dk) viewed as (N, C) or (N, C, 1, d1*..*dk): oneDNN takes ranks 2 to 5 only,
/// the statistics do not depend on how the spatial axes are split, and oneDNN 2.6 has jitted
/// plain-layout kernels for ranks 2 and 4 but only a reference one for rank 3.
dnnl::memory::desc batchNormDesc(const std::vector<int64_t> &x) {
  if (x.size() == 2)
    return plainDesc(x);
  int64_t s = 1;
  for (size_t i = 2; i < x.size(); ++i)
    s *= x[i];
  return plainDesc({x[0], x[1], 1, s});
}

/// Elements per channel: N * d1 * ... * dk.
int64_t perChannel(const std::vector<int64_t> &x) {
  int64_t n = x[0];
  for (size_t i = 2; i < x.size(); ++i)
    n *= x[i];
  return n;
}

/// Shared checks of BatchNormTraining and BatchNormGrad: f32 operands, X (input xIndex) of rank
/// >= 2 with at least one element per channel, inputs [xIndex + 1, 5) and outputs 1.. of shape
/// [C], output 0 of X's shape.
Status checkBatchNormLike(const KernelSpec &spec, size_t xIndex, size_t maxOutputs) {
  if (spec.inputs.size() != 5 || spec.outputs.empty() || spec.outputs.size() > maxOutputs)
    return spec.error("expected 5 inputs and 1 to " + std::to_string(maxOutputs) +
                      " outputs, got " + std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  for (size_t i = 0; i < 5; ++i) {
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is required");
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  }
  if (!spec.outputs[0].present())
    return spec.error("output 0 is required");
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const auto &x = spec.inputs[xIndex].shape;
  if (x.size() < 2)
    return spec.error("X has rank " + std::to_string(x.size()) + "; expected (N, C, ...)");
  if (x[1] > 0 && perChannel(x) == 0)
    return spec.error("X " + shapeStr(x) +
                      " has no element per channel; batch statistics need "
                      "at least one");
  for (size_t i = 0; i < xIndex; ++i)
    if (spec.inputs[i].shape != x)
      return spec.error("input " + std::to_string(i) + " has shape " +
                        shapeStr(spec.inputs[i].shape) + ", expected " + shapeStr(x));
  const std::vector<int64_t> c = {x[1]};
  for (size_t i = xIndex + 1; i < 5; ++i)
    if (spec.inputs[i].shape != c)
      return spec.error("input " + std::to_string(i) + " has shape " +
                        shapeStr(spec.inputs[i].shape) + ", expected " + shapeStr(c));
  for (size_t i = 1; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present() && spec.outputs[i].shape != c)
      return spec.error("output " + std::to_string(i) + " has shape " +
                        shapeStr(spec.outputs[i].shape) + ", expected " + shapeStr(c));
  return checkOutputShape(spec, x);
}

/// Binds `arg` to kernel output `index` when the node has it, else to an owned scratch memory
/// (kept in `scratch`).
void outputOrScratch(PrimitiveRunner &r, CpuContext &ctx, const KernelSpec &spec, int arg,
                     const dnnl::memory::desc &md, size_t index, dnnl::memory &scratch) {
  if (present(spec.outputs, index)) {
    r.output(arg, md, index);
    return;
  }
  scratch = dnnl::memory(md, ctx.engine);
  r.fixed(arg, scratch);
}

// ---------------------------------------------------------------------------------------------
// BatchNormTraining

class BatchNormTrainingKernel : public Kernel {
public:
  BatchNormTrainingKernel(const KernelSpec &spec, CpuContext &ctx)
      : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    try {
      runner_.execute(args);
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    const float *mean = args.numOutputs > 3 && args.outputs[3]
                            ? static_cast<const float *>(args.outputs[3])
                            : static_cast<const float *>(meanScratch_.get_data_handle());
    const float *var = args.numOutputs > 4 && args.outputs[4]
                           ? static_cast<const float *>(args.outputs[4])
                           : static_cast<const float *>(varScratch_.get_data_handle());
    const float *inMean = static_cast<const float *>(args.inputs[3]);
    const float *inVar = static_cast<const float *>(args.inputs[4]);
    float *runMean = args.numOutputs > 1 ? static_cast<float *>(args.outputs[1]) : nullptr;
    float *runVar = args.numOutputs > 2 ? static_cast<float *>(args.outputs[2]) : nullptr;
    const float keep = momentum_, take = 1.f - momentum_;
    if (runMean)
      for (int64_t c = 0; c < channels_; ++c)
        runMean[c] = inMean[c] * keep + mean[c] * take;
    if (runVar)
      for (int64_t c = 0; c < channels_; ++c)
        runVar[c] = inVar[c] * keep + var[c] * unbias_ * take;
    return Status::ok();
  }

  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner runner_;
  dnnl::memory meanScratch_, varScratch_;
  int64_t channels_ = 0;
  float momentum_ = 0.9f, unbias_ = 1.f;
};

// ---------------------------------------------------------------------------------------------
// LayerNormGrad

/// For Scale of shape `s` broadcast to `tail`: the source index of each of the tail's elements
/// (row-major).
std::vector<int64_t> broadcastIndex(const std::vector<int64_t> &s,
                                    const std::vector<int64_t> &tail) {
  std::vector<int64_t> padded(tail.size() - s.size(), 1);
  padded.insert(padded.end(), s.begin(), s.end());
  std::vector<int64_t> srcStrides = rowMajorStrides(padded);
  for (size_t d = 0; d < tail.size(); ++d)
    if (padded[d] == 1)
      srcStrides[d] = 0;
  int64_t total = 1;
  for (int64_t d : tail)
    total *= d;
  std::vector<int64_t> index(static_cast<size_t>(total));
  std::vector<int64_t> idx(tail.size(), 0);
  int64_t src = 0;
  for (int64_t o = 0; o < total; ++o) {
    index[static_cast<size_t>(o)] = src;
    for (size_t d = tail.size(); d-- > 0;) {
      src += srcStrides[d];
      if (++idx[d] < tail[d])
        break;
      src -= srcStrides[d] * tail[d];
      idx[d] = 0;
    }
  }
  return index;
}

struct NormShape {
  int64_t axis = 0, outer = 1, inner = 1;
  std::vector<int64_t> tail;
};

NormShape normShape(const std::vector<int64_t> &x, int64_t axis) {
  NormShape n;
  int64_t rank = static_cast<int64_t>(x.size());
  n.axis = axis < 0 ? axis + rank : axis;
  for (int64_t i = 0; i < rank; ++i)
    (i < n.axis ? n.outer : n.inner) *= x[static_cast<size_t>(i)];
  n.tail.assign(x.begin() + n.axis, x.end());
  return n;
}

class LayerNormGradKernel : public Kernel {
public:
  LayerNormGradKernel(const KernelSpec &spec, CpuContext &ctx) : where_(spec.where()), ctx_(ctx) {}

  Status run(const KernelArgs &args) override {
    if (outer_ == 0) { // no rows: the parameter gradients are empty sums
      for (size_t o = 1; o < args.numOutputs; ++o)
        if (args.outputs[o])
          std::fill_n(static_cast<float *>(args.outputs[o]), inner_, 0.f);
      return Status::ok();
    }
    if (!scaleIndex_.empty()) {
      const float *src = static_cast<const float *>(args.inputs[2]);
      float *dst = static_cast<float *>(scaleExpanded_.get_data_handle());
      for (size_t i = 0; i < scaleIndex_.size(); ++i)
        dst[i] = src[scaleIndex_[i]];
    }
    try {
      // Mean and variance of each row (the normalized values go to dX, overwritten next).
      stats_.execute(args);
      backward_.execute(args);
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    return Status::ok();
  }

  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner stats_, backward_;
  dnnl::memory mean_, var_, scaleExpanded_, diffScaleScratch_;
  std::vector<int64_t> scaleIndex_;
  int64_t outer_ = 0, inner_ = 0;
};

} // namespace

// ---------------------------------------------------------------------------------------------

Status checkBatchNormTraining(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkBatchNormLike(spec, 0, 5));
  float momentum = spec.attrFloat("momentum", 0.9f);
  if (!(momentum >= 0.f && momentum <= 1.f))
    return spec.error("momentum must be in [0, 1], got " + std::to_string(momentum));
  return Status::ok();
}

Expected<KernelPtr> createBatchNormTraining(const KernelSpec &spec, CpuContext &ctx) {
  const auto &x = spec.inputs[0].shape;
  auto k = std::make_unique<BatchNormTrainingKernel>(spec, ctx);
  k->channels_ = x[1];
  k->momentum_ = spec.attrFloat("momentum", 0.9f);
  const int64_t n = perChannel(x);
  // Bessel's correction of the variance that enters running_var (PyTorch); none for n = 1.
  k->unbias_ =
      n > 1 ? static_cast<float>(static_cast<double>(n) / static_cast<double>(n - 1)) : 1.f;
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc md = batchNormDesc(x);
    dnnl::memory::desc cmd = plainDesc({x[1]});
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_training, md,
                                              spec.attrFloat("epsilon", 1e-5f),
                                              F::use_scale | F::use_shift);
    dnnl::batch_normalization_forward::primitive_desc pd(d, ctx.engine);
    k->runner_ = PrimitiveRunner(dnnl::batch_normalization_forward(pd), ctx);
    k->runner_.input(DNNL_ARG_SRC, md, 0);
    k->runner_.input(DNNL_ARG_SCALE, cmd, 1);
    k->runner_.input(DNNL_ARG_SHIFT, cmd, 2);
    k->runner_.output(DNNL_ARG_DST, md, 0);
    outputOrScratch(k->runner_, ctx, spec, DNNL_ARG_MEAN, cmd, 3, k->meanScratch_);
    outputOrScratch(k->runner_, ctx, spec, DNNL_ARG_VARIANCE, cmd, 4, k->varScratch_);
    return KernelPtr(std::move(k));
  });
}

Status checkBatchNormGrad(const KernelSpec &spec) { return checkBatchNormLike(spec, 1, 3); }

Expected<KernelPtr> createBatchNormGrad(const KernelSpec &spec, CpuContext &ctx) {
  const auto &x = spec.inputs[1].shape;
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc md = batchNormDesc(x);
    dnnl::memory::desc cmd = plainDesc({x[1]});
    const float eps = spec.attrFloat("epsilon", 1e-5f);
    const F flags = F::use_scale | F::use_shift;
    dnnl::batch_normalization_forward::primitive_desc hint(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, md, eps, flags),
        ctx.engine);
    dnnl::batch_normalization_backward::primitive_desc pd(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, md, md, eps, flags),
        ctx.engine, hint);
    PrimitiveRunner r(dnnl::batch_normalization_backward(pd), ctx);
    r.input(DNNL_ARG_DIFF_DST, md, 0);
    r.input(DNNL_ARG_SRC, md, 1);
    r.input(DNNL_ARG_SCALE, cmd, 2);
    // oneDNN 2.6 refuses to run a use_shift backward without a SHIFT argument, which it does
    // not read (dX does not depend on B): the scale stands in for it.
    r.input(DNNL_ARG_SHIFT, cmd, 2);
    r.input(DNNL_ARG_MEAN, cmd, 3);
    r.input(DNNL_ARG_VARIANCE, cmd, 4);
    r.output(DNNL_ARG_DIFF_SRC, md, 0);
    // Absent dScale / dB outputs go to scratch memories that the runner keeps alive.
    dnnl::memory scratch;
    outputOrScratch(r, ctx, spec, DNNL_ARG_DIFF_SCALE, cmd, 1, scratch);
    outputOrScratch(r, ctx, spec, DNNL_ARG_DIFF_SHIFT, cmd, 2, scratch);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

/// oneDNN's batch normalization backward may write diff_src over diff_dst.
int inPlaceBatchNormGrad(const KernelSpec &spec) {
  return checkBatchNormGrad(spec).isOk() ? 0 : -1;
}

Status checkLayerNormGrad(const KernelSpec &spec) {
  if (spec.inputs.size() != 3 || spec.outputs.size() < 2 || spec.outputs.size() > 3)
    return spec.error("expected 3 inputs and 2 to 3 outputs, got " +
                      std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  for (size_t i = 0; i < 3; ++i) {
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is required");
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  }
  for (size_t i = 0; i < 2; ++i)
    if (!spec.outputs[i].present())
      return spec.error("output " + std::to_string(i) + " is required");
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  float eps = spec.attrFloat("epsilon", 1e-5f);
  if (!(eps >= 0.0f) || !std::isfinite(eps))
    return spec.error("epsilon must be finite and >= 0, got " + std::to_string(eps));
  const auto &x = spec.inputs[1].shape;
  int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (rank == 0)
    return spec.error("X is a scalar; LayerNormalization needs rank >= 1");
  if (axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  if (spec.inputs[0].shape != x)
    return spec.error("dY " + shapeStr(spec.inputs[0].shape) + " and X " + shapeStr(x) + " differ");
  NormShape n = normShape(x, axis);
  std::vector<int64_t> b;
  if (!broadcastShapes(n.tail, spec.inputs[2].shape, b) || b != n.tail)
    return spec.error("Scale " + shapeStr(spec.inputs[2].shape) +
                      " does not broadcast to the normalized shape " + shapeStr(n.tail));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, x));
  for (size_t i = 1; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present() && spec.outputs[i].shape != n.tail)
      return spec.error("output " + std::to_string(i) + " has shape " +
                        shapeStr(spec.outputs[i].shape) + ", expected " + shapeStr(n.tail));
  return Status::ok();
}

Expected<KernelPtr> createLayerNormGrad(const KernelSpec &spec, CpuContext &ctx) {
  NormShape n = normShape(spec.inputs[1].shape, spec.attrInt("axis", -1));
  auto k = std::make_unique<LayerNormGradKernel>(spec, ctx);
  k->outer_ = n.outer;
  k->inner_ = n.inner;
  if (n.outer == 0 || n.inner == 0)
    return KernelPtr(std::move(k));
  const bool wantB = present(spec.outputs, 2);
  return buildKernel(spec, [&]() -> KernelPtr {
    const float eps = spec.attrFloat("epsilon", 1e-5f);
    dnnl::memory::desc data = plainDesc({n.outer, n.inner});
    dnnl::memory::desc stat = plainDesc({n.outer});
    dnnl::memory::desc param = plainDesc({n.inner});
    k->mean_ = dnnl::memory(stat, ctx.engine);
    k->var_ = dnnl::memory(stat, ctx.engine);

    using LnFwd = dnnl::layer_normalization_forward;
    using LnBwd = dnnl::layer_normalization_backward;
    LnFwd::primitive_desc statsPd(
        LnFwd::desc(dnnl::prop_kind::forward_training, data, stat, eps, F::none), ctx.engine);
    k->stats_ = PrimitiveRunner(LnFwd(statsPd), ctx);
    k->stats_.input(DNNL_ARG_SRC, data, 1);
    k->stats_.output(DNNL_ARG_DST, data, 0); // dX as scratch
    k->stats_.fixed(DNNL_ARG_MEAN, k->mean_);
    k->stats_.fixed(DNNL_ARG_VARIANCE, k->var_);

    const F flags = wantB ? F::use_scale | F::use_shift : F::use_scale;
    LnFwd::primitive_desc hint(
        LnFwd::desc(dnnl::prop_kind::forward_training, data, stat, eps, flags), ctx.engine);
    LnBwd::primitive_desc pd(LnBwd::desc(dnnl::prop_kind::backward, data, data, stat, eps, flags),
                             ctx.engine, hint);
    k->backward_ = PrimitiveRunner(LnBwd(pd), ctx);
    k->backward_.input(DNNL_ARG_DIFF_DST, data, 0);
    k->backward_.input(DNNL_ARG_SRC, data, 1);
    k->backward_.fixed(DNNL_ARG_MEAN, k->mean_);
    k->backward_.fixed(DNNL_ARG_VARIANCE, k->var_);
    // oneDNN 2.6 refuses to run a use_shift backward without a SHIFT argument, which it does
    // not read (dX does not depend on B): the scale stands in for it.
    std::vector<int> scaleArgs = {DNNL_ARG_SCALE};
    if (wantB)
      scaleArgs.push_back(DNNL_ARG_SHIFT);
    if (spec.inputs[2].numElements() != n.inner) {
      k->scaleIndex_ = broadcastIndex(spec.inputs[2].shape, n.tail);
      k->scaleExpanded_ = dnnl::memory(param, ctx.engine);
    }
    for (int arg : scaleArgs) {
      if (k->scaleIndex_.empty())
        k->backward_.input(arg, param, 2);
      else
        k->backward_.fixed(arg, k->scaleExpanded_);
    }
    k->backward_.output(DNNL_ARG_DIFF_SRC, data, 0);
    k->backward_.output(DNNL_ARG_DIFF_SCALE, param, 1);
    if (wantB)
      k->backward_.output(DNNL_ARG_DIFF_SHIFT, param, 2);
    return KernelPtr(std::move(k));
  });
}

} // namespace dtc::ops::cpu
