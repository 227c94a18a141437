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

namespace dtc::ops::cuda {

namespace {

enum class NormKind { kBatchInference, kBatchTraining, kBatchGrad, kLayer, kLayerGrad };

class NormKernel : public Kernel {
public:
  NormKernel(const KernelSpec &spec, CudaContext &ctx, NormKind kind)
      : spec_(spec), ctx_(ctx), kind_(kind) {}

  Status run(const KernelArgs &args) override {
    float *scratch = static_cast<float *>(scratch_.get());
    int e = 0;
    switch (kind_) {
    case NormKind::kBatchInference:
      e = launchBatchNormInference(batchNormArgs(spec_, args, scratch), ctx_.stream());
      break;
    case NormKind::kBatchTraining:
      e = launchBatchNormTraining(batchNormArgs(spec_, args, scratch), ctx_.stream());
      break;
    case NormKind::kBatchGrad:
      e = launchBatchNormGrad(batchNormArgs(spec_, args, scratch), ctx_.stream());
      break;
    case NormKind::kLayer:
      e = launchLayerNorm(layerNormArgs(spec_, args, scratch), ctx_.stream());
      break;
    case NormKind::kLayerGrad:
      e = launchLayerNormGrad(layerNormArgs(spec_, args, scratch), ctx_.stream());
      break;
    }
    if (e != 0)
      return cudaStatus(static_cast<cudaError_t>(e), spec_.where(), "the normalization kernel");
    return Status::ok();
  }

  KernelSpec spec_;
  CudaContext &ctx_;
  NormKind kind_;
  DeviceBuffer scratch_; ///< saved statistics the node does not output; row statistics
};

/// The kernel with `floats` floats of scratch (none for 0).
Expected<KernelPtr> makeNorm(const KernelSpec &spec, CudaContext &ctx, NormKind kind,
                             int64_t floats) {
  auto k = std::make_unique<NormKernel>(spec, ctx, kind);
  if (floats > 0) {
    DTC_ASSIGN_OR_RETURN(k->scratch_, ctx.allocate(static_cast<size_t>(floats) * sizeof(float),
                                                   spec.where() + " statistics"));
  }
  return KernelPtr(std::move(k));
}

bool present(const std::vector<TensorDesc> &v, size_t i) { return v.size() > i && v[i].present(); }

} // namespace

Expected<KernelPtr> createBatchNorm(const KernelSpec &spec, CudaContext &ctx) {
  return makeNorm(spec, ctx, NormKind::kBatchInference, 0);
}

Expected<KernelPtr> createBatchNormTraining(const KernelSpec &spec, CudaContext &ctx) {
  bool saved = present(spec.outputs, 3) && present(spec.outputs, 4);
  return makeNorm(spec, ctx, NormKind::kBatchTraining, saved ? 0 : 2 * spec.inputs[0].shape[1]);
}

Expected<KernelPtr> createBatchNormGrad(const KernelSpec &spec, CudaContext &ctx) {
  return makeNorm(spec, ctx, NormKind::kBatchGrad, 0);
}

Expected<KernelPtr> createLayerNorm(const KernelSpec &spec, CudaContext &ctx) {
  return makeNorm(spec, ctx, NormKind::kLayer, 0);
}

Expected<KernelPtr> createLayerNormGrad(const KernelSpec &spec, CudaContext &ctx) {
  // Each row's mean and invstd, kept between the row and column kernels.
  LayerNormArgs a = layerNormArgs(spec, KernelArgs{nullptr, 0, nullptr, 0}, nullptr);
  return makeNorm(spec, ctx, NormKind::kLayerGrad, 2 * std::max<int64_t>(a.outer, 1));
}

} // namespace dtc::ops::cuda
