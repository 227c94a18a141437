// CUDA kernels of Softmax and LogSoftmax (opset-13 semantics: over the one axis `axis`, default
// -1) and their gradients ai.dtc.SoftmaxGrad / ai.dtc.LogSoftmaxGrad (dY, Y): hand-written
// kernels (DenseKernels.cu) on the [outer, axis, inner] view of the tensor, one warp per row.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DenseUtil.h"

namespace dtc::ops::cuda {

namespace {

class SoftmaxKernel : public Kernel {
public:
  SoftmaxKernel(const KernelSpec &spec, CudaContext &ctx, bool grad)
      : where_(spec.where()), ctx_(ctx), grad_(grad),
        log_(spec.op == "LogSoftmax" || spec.op == "LogSoftmaxGrad") {
    const auto &shape = spec.inputs[0].shape;
    int64_t rank = static_cast<int64_t>(shape.size());
    int64_t axis = spec.attrInt("axis", -1);
    if (axis < 0)
      axis += rank;
    for (int64_t a = 0; a < rank; ++a) {
      int64_t s = shape[static_cast<size_t>(a)];
      if (a < axis)
        outer_ *= s;
      else if (a == axis)
        n_ = s;
      else
        inner_ *= s;
    }
  }

  Status run(const KernelArgs &args) override {
    if (outer_ * n_ * inner_ == 0)
      return Status::ok();
    int e = grad_ ? launchSoftmaxGrad(static_cast<const float *>(args.inputs[0]),
                                      static_cast<const float *>(args.inputs[1]),
                                      static_cast<float *>(args.outputs[0]), outer_, n_, inner_,
                                      log_, ctx_.stream())
                  : launchSoftmax(static_cast<const float *>(args.inputs[0]),
                                  static_cast<float *>(args.outputs[0]), outer_, n_, inner_, log_,
                                  ctx_.stream());
    if (e != 0)
      return cudaStatus(static_cast<cudaError_t>(e), where_, "the softmax kernel");
    return Status::ok();
  }

private:
  std::string where_;
  CudaContext &ctx_;
  bool grad_, log_;
  int64_t outer_ = 1, n_ = 1, inner_ = 1;
};

} // namespace

Expected<KernelPtr> createSoftmax(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<SoftmaxKernel>(spec, ctx, false));
}

Expected<KernelPtr> createSoftmaxGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<SoftmaxKernel>(spec, ctx, true));
}

} // namespace dtc::ops::cuda
