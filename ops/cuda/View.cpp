// Views on the GPU: the planner aliases output 0 with input 0 where it can; otherwise one
// device-to-device copy on the compute stream.
#include "ops/cuda/CudaKernel.h"

namespace dtc::ops::cuda {

namespace {

class ViewKernel : public Kernel {
public:
  ViewKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), bytes_(static_cast<size_t>(spec.outputs[0].byteSize())), ctx_(ctx) {}
  Status run(const KernelArgs &args) override {
    if (args.outputs[0] == args.inputs[0])
      return Status::ok();
    DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemcpyAsync(args.outputs[0], args.inputs[0], bytes_,
                                                     cudaMemcpyDeviceToDevice, ctx_.stream()));
    return Status::ok();
  }

private:
  std::string where_;
  size_t bytes_;
  CudaContext &ctx_;
};

} // namespace

Expected<KernelPtr> createView(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ViewKernel>(spec, ctx));
}

} // namespace dtc::ops::cuda
