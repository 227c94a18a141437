// The CUDA kernel registry: makes kernels from Kernels.def after the CUDA target's check, wrapped
// with the operand checks every run gets (makeCheckedKernel).
#include "ops/cuda/CudaKernel.h"
#include "ops/kernel/Target.h"

namespace dtc::ops::cuda {

namespace {

struct Entry {
  const char *domain;
  const char *op;
  Expected<KernelPtr> (*create)(const KernelSpec &, CudaContext &);
};

const std::vector<Entry> &entries() {
  static const std::vector<Entry> kEntries = {
#define DTC_CUDA_KERNEL(domain, op, check, create, inPlace, view) {domain, op, &create},
#include "ops/cuda/Kernels.def"
#undef DTC_CUDA_KERNEL
  };
  return kEntries;
}

} // namespace

Expected<KernelPtr> createKernel(const KernelSpec &spec, CudaContext &ctx) {
  DTC_RETURN_IF_ERROR(cudaTarget().checkKernel(spec));
  const std::string d = spec.domain == "ai.onnx" ? "" : spec.domain;
  const Entry *e = nullptr;
  for (const Entry &x : entries())
    if (d == x.domain && spec.op == x.op)
      e = &x;
  if (!e) // the target's check found it: the two tables come from the same file
    return spec.error("no CUDA kernel");
  return makeCheckedKernel(spec, [&]() { return e->create(spec, ctx); });
}

} // namespace dtc::ops::cuda
