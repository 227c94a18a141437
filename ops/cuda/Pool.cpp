// CUDA kernels of MaxPool, AveragePool, GlobalAveragePool (1-D to 3-D, row-major) and their
// gradients ai.dtc.MaxPoolGrad (dY, X) and ai.dtc.AveragePoolGrad (dY): hand-written kernels
// (DenseKernels.cu) over the window math of DenseUtil.h, the CPU kernels' conventions exactly
// (ceil_mode, count_include_pad's divisor, NaN in a max window, the first maximum of a window
// receives MaxPoolGrad's gradient). cuDNN's pooling differs on these points (its max backward
// needs Y, its ties and NaN handling are its own), so it is not used.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DenseUtil.h"

namespace dtc::ops::cuda {

namespace {

class PoolKernel : public Kernel {
public:
  PoolKernel(const KernelSpec &spec, CudaContext &ctx, PoolGeom g, bool backward)
      : where_(spec.where()), ctx_(ctx), g_(g), backward_(backward) {}

  Status run(const KernelArgs &args) override {
    int e;
    if (backward_)
      e = launchPoolBackward(g_, static_cast<const float *>(args.inputs[0]),
                             g_.max ? static_cast<const float *>(args.inputs[1]) : nullptr,
                             static_cast<float *>(args.outputs[0]), ctx_.stream());
    else
      e = launchPoolForward(g_, static_cast<const float *>(args.inputs[0]),
                            static_cast<float *>(args.outputs[0]), ctx_.stream());
    if (e != 0)
      return cudaStatus(static_cast<cudaError_t>(e), where_, "the pooling kernel");
    return Status::ok();
  }

private:
  std::string where_;
  CudaContext &ctx_;
  PoolGeom g_;
  bool backward_;
};

} // namespace

Expected<KernelPtr> createPool(const KernelSpec &spec, CudaContext &ctx) {
  PoolGeom g = poolGeom(spec, spec.inputs[0].shape, spec.outputs[0].shape, spec.op == "MaxPool",
                        spec.op == "GlobalAveragePool");
  return KernelPtr(std::make_unique<PoolKernel>(spec, ctx, g, false));
}

Expected<KernelPtr> createPoolGrad(const KernelSpec &spec, CudaContext &ctx) {
  // MaxPoolGrad(dY, X) -> dX; AveragePoolGrad(dY) -> dX of shape input_shape.
  PoolGeom g =
      poolGeom(spec, spec.outputs[0].shape, spec.inputs[0].shape, spec.op == "MaxPoolGrad", false);
  return KernelPtr(std::make_unique<PoolKernel>(spec, ctx, g, true));
}

} // namespace dtc::ops::cuda
