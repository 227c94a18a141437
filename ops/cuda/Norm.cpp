// CUDA kernels of BatchNormalization (inference), ai.dtc.BatchNormTraining (outputs Y, running
// mean, running variance, saved mean, saved biased variance) and ai.dtc.BatchNormGrad (dY, X,
// scale, saved mean, saved variance -> dX, dScale, dB): hand-written kernels (DenseKernels.cu)
// with the CPU kernels' conventions (ops/cpu/NNGradNorm.cpp): statistics and gradient sums in
// double, running variance unbiased by M / (M - 1) as PyTorch, momentum weighting the old value.
// cuDNN's batch norm is not used: its saved statistics are the inverse standard deviation and
// its running-average factor the other way round, so matching the plan's operands would cost
// extra kernels anyway. sync=1 is rejected by the check (DenseCheck.cpp). LayerNormalization
// (outputs Y, Mean?, InvStdDev?) and ai.dtc.LayerNormGrad (dY, X, Scale -> dX, dScale, dB?) work
// on the [outer, inner] view of X (inner = the product of X.shape[axis:]).
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DenseUtil.h"

#include <algorithm>
#include <tuple>

namespace dtc::ops::cuda {

namespace {

ChannelDims channelDims(const std::vector<int64_t> &x) {
  ChannelDims d;
  d.batch = x[0];
  d.channels = x[1];
  for (size_t i = 2; i < x.size(); ++i)
    d.spatial *= x[i];
  return d;
}

/// Output i's pointer, or null when the node does not produce it.
float *output(const KernelArgs &args, size_t i) {
  return args.numOutputs > i ? static_cast<float *>(args.outputs[i]) : nullptr;
}

const float *input(const KernelArgs &args, size_t i) {
  return static_cast<const float *>(args.inputs[i]);
}

enum class NormKind { kInference, kTraining, kGrad };

class BatchNormKernel : public Kernel {
public:
  BatchNormKernel(const KernelSpec &spec, CudaContext &ctx, NormKind kind)
      : where_(spec.where()), ctx_(ctx), kind_(kind),
        d_(channelDims(spec.inputs[kind == NormKind::kGrad ? 1 : 0].shape)),
        momentum_(spec.attrFloat("momentum", 0.9f)), eps_(spec.attrFloat("epsilon", 1e-5f)) {}

  Status run(const KernelArgs &args) override {
    if (d_.batch * d_.channels * d_.spatial == 0 && kind_ == NormKind::kInference)
      return Status::ok();
    int e = 0;
    switch (kind_) {
    case NormKind::kInference:
      e = launchBatchNormInference(d_, input(args, 0), input(args, 1), input(args, 2),
                                   input(args, 3), input(args, 4), eps_, output(args, 0),
                                   ctx_.stream());
      break;
    case NormKind::kTraining: {
      float *mean = output(args, 3), *var = output(args, 4);
      float *scratch = static_cast<float *>(scratch_.get());
      e = launchBatchNormTraining(d_, input(args, 0), input(args, 1), input(args, 2),
                                  input(args, 3), input(args, 4), momentum_, eps_, output(args, 0),
                                  output(args, 1), output(args, 2), mean ? mean : scratch,
                                  var ? var : scratch + d_.channels, ctx_.stream());
      break;
    }
    case NormKind::kGrad:
      e = launchBatchNormGrad(d_, input(args, 0), input(args, 1), input(args, 2), input(args, 3),
                              input(args, 4), eps_, output(args, 0), output(args, 1),
                              output(args, 2), ctx_.stream());
      break;
    }
    if (e != 0)
      return cudaStatus(static_cast<cudaError_t>(e), where_, "the normalization kernel");
    return Status::ok();
  }

  std::string where_;
  CudaContext &ctx_;
  NormKind kind_;
  ChannelDims d_;
  float momentum_, eps_;
  DeviceBuffer scratch_; ///< saved mean and variance the node does not output
};

/// The [outer, inner] view of X for LayerNormalization's axis.
std::pair<int64_t, int64_t> rows(const std::vector<int64_t> &x, int64_t axis) {
  int64_t rank = static_cast<int64_t>(x.size()), outer = 1, inner = 1;
  if (axis < 0)
    axis += rank;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= x[static_cast<size_t>(i)];
  return {outer, inner};
}

class LayerNormKernel : public Kernel {
public:
  LayerNormKernel(const KernelSpec &spec, CudaContext &ctx, bool grad)
      : where_(spec.where()), ctx_(ctx), grad_(grad), eps_(spec.attrFloat("epsilon", 1e-5f)) {
    std::tie(outer_, inner_) = rows(spec.inputs[grad ? 1 : 0].shape, spec.attrInt("axis", -1));
  }

  Status run(const KernelArgs &args) override {
    int e;
    if (grad_)
      e = launchLayerNormGrad(input(args, 0), input(args, 1), input(args, 2), eps_, output(args, 0),
                              output(args, 1), output(args, 2), static_cast<float *>(stats_.get()),
                              outer_, inner_, ctx_.stream());
    else
      e = launchLayerNorm(input(args, 0), input(args, 1),
                          args.numInputs > 2 ? input(args, 2) : nullptr, eps_, output(args, 0),
                          output(args, 1), output(args, 2), outer_, inner_, ctx_.stream());
    if (e != 0)
      return cudaStatus(static_cast<cudaError_t>(e), where_, "the normalization kernel");
    return Status::ok();
  }

  std::string where_;
  CudaContext &ctx_;
  bool grad_;
  float eps_;
  int64_t outer_ = 0, inner_ = 0;
  DeviceBuffer stats_; ///< LayerNormGrad: each row's mean and invstd
};

} // namespace

Expected<KernelPtr> createLayerNorm(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<LayerNormKernel>(spec, ctx, false));
}

Expected<KernelPtr> createLayerNormGrad(const KernelSpec &spec, CudaContext &ctx) {
  auto k = std::make_unique<LayerNormKernel>(spec, ctx, true);
  size_t bytes = 2 * static_cast<size_t>(std::max<int64_t>(k->outer_, 1)) * sizeof(float);
  DTC_ASSIGN_OR_RETURN(k->stats_, ctx.allocate(bytes, spec.where() + " row statistics"));
  return KernelPtr(std::move(k));
}

Expected<KernelPtr> createBatchNorm(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<BatchNormKernel>(spec, ctx, NormKind::kInference));
}

Expected<KernelPtr> createBatchNormTraining(const KernelSpec &spec, CudaContext &ctx) {
  auto k = std::make_unique<BatchNormKernel>(spec, ctx, NormKind::kTraining);
  const auto &out = spec.outputs;
  if (out.size() > 4 && out[3].present() && out[4].present())
    return KernelPtr(std::move(k));
  size_t bytes = 2 * static_cast<size_t>(std::max<int64_t>(k->d_.channels, 1)) * sizeof(float);
  DTC_ASSIGN_OR_RETURN(k->scratch_, ctx.allocate(bytes, spec.where() + " saved statistics"));
  return KernelPtr(std::move(k));
}

Expected<KernelPtr> createBatchNormGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<BatchNormKernel>(spec, ctx, NormKind::kGrad));
}

} // namespace dtc::ops::cuda
