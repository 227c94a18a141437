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
      : spec_(spec), ctx_(ctx), grad_(grad) {}

  Status run(const KernelArgs &args) override {
    int e = launchSoftmax(softmaxArgs(spec_, args), grad_, ctx_.stream());
    if (e != 0)
      return cudaStatus(static_cast<cudaError_t>(e), spec_.where(), "the softmax kernel");
    return Status::ok();
  }

private:
  KernelSpec spec_;
  CudaContext &ctx_;
  bool grad_;
};

} // namespace

Expected<KernelPtr> createSoftmax(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<SoftmaxKernel>(spec, ctx, false));
}

Expected<KernelPtr> createSoftmaxGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<SoftmaxKernel>(spec, ctx, true));
}

} // namespace dtc::ops::cuda
