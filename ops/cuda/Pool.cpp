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

/// The geometry from the forward input's shape `x`, the output's `y` and the attributes.
PoolGeom poolGeom(const KernelSpec &spec, const std::vector<int64_t> &x,
                  const std::vector<int64_t> &y, bool max, bool global) {
  PoolGeom g;
  size_t sp = x.size() - 2;
  g.planes = x[0] * x[1];
  g.max = max;
  g.includePad = !max && spec.attrInt("count_include_pad", 0) == 1;
  std::vector<int64_t> kernel =
      global ? std::vector<int64_t>(x.begin() + 2, x.end()) : spec.attrInts("kernel_shape");
  std::vector<int64_t> strides =
      global ? std::vector<int64_t>(sp, 1) : spec.attrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dilations = global ? std::vector<int64_t>(sp, 1)
                                          : spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = global ? std::vector<int64_t>(2 * sp, 0)
                                     : spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  for (size_t i = 0; i < sp; ++i) {
    g.in[i] = x[2 + i];
    g.out[i] = y[2 + i];
    g.k[i] = kernel[i];
    g.s[i] = strides[i];
    g.d[i] = dilations[i];
    g.pb[i] = pads[i];
    g.pe[i] = pads[i + sp];
  }
  return g;
}

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
    DTC_CUDA_RETURN_IF_ERROR(where_, static_cast<cudaError_t>(e));
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
  PoolGeom g = poolGeom(spec, spec.outputs[0].shape, spec.inputs[0].shape,
                        spec.op == "MaxPoolGrad", false);
  return KernelPtr(std::make_unique<PoolKernel>(spec, ctx, g, true));
}

} // namespace dtc::ops::cuda
