// The CUDA kernel registry: makes kernels from Kernels.def after the CUDA target's check, and
// wraps them with the operand checks every run gets.
#include "ops/cuda/CudaKernel.h"
#include "ops/kernel/Target.h"

#include <algorithm>

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

/// Checks a run's operand pointers against the spec before the kernel sees them (a missing
/// buffer is an error naming the node, never a launch on a null pointer).
class CheckedKernel : public Kernel {
public:
  CheckedKernel(const KernelSpec &spec, KernelPtr inner)
      : where_(spec.where()), inner_(std::move(inner)), inputs_(spec.inputs.size(), nullptr) {
    for (const TensorDesc &t : spec.inputs)
      required_.push_back(t.present() && t.byteSize() > 0);
    for (const TensorDesc &t : spec.outputs)
      outputBytes_.push_back(t.byteSize());
  }

  Status run(const KernelArgs &args) override {
    if (args.numInputs > inputs_.size() || (args.numInputs > 0 && !args.inputs))
      return Status::error(where_, "run with " + std::to_string(args.numInputs) +
                                       " inputs; the kernel has " + std::to_string(inputs_.size()));
    if (args.numOutputs != outputBytes_.size() || (args.numOutputs > 0 && !args.outputs))
      return Status::error(where_, "run with " + std::to_string(args.numOutputs) +
                                       " outputs; the kernel has " +
                                       std::to_string(outputBytes_.size()));
    for (size_t i = 0; i < inputs_.size(); ++i) {
      inputs_[i] = i < args.numInputs ? args.inputs[i] : nullptr;
      if (required_[i] && !inputs_[i])
        return Status::error(where_, "input " + std::to_string(i) + " has no buffer");
    }
    for (size_t i = 0; i < outputBytes_.size(); ++i)
      if (outputBytes_[i] > 0 && !args.outputs[i])
        return Status::error(where_, "output " + std::to_string(i) + " has no buffer");
    if (std::none_of(outputBytes_.begin(), outputBytes_.end(), [](int64_t b) { return b > 0; }))
      return Status::ok();
    KernelArgs inner{inputs_.data(), inputs_.size(), args.outputs, args.numOutputs};
    return inner_->run(inner);
  }

private:
  std::string where_;
  KernelPtr inner_;
  std::vector<const void *> inputs_;
  std::vector<bool> required_;
  std::vector<int64_t> outputBytes_;
};

class NoOpKernel : public Kernel {
public:
  Status run(const KernelArgs &) override { return Status::ok(); }
};

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
  KernelPtr inner;
  if (std::none_of(spec.outputs.begin(), spec.outputs.end(),
                   [](const TensorDesc &t) { return t.byteSize() > 0; })) {
    inner = std::make_unique<NoOpKernel>();
  } else {
    DTC_ASSIGN_OR_RETURN(inner, e->create(spec, ctx));
    if (!spec.attrKindError.empty())
      return spec.error(spec.attrKindError);
  }
  return KernelPtr(std::make_unique<CheckedKernel>(spec, std::move(inner)));
}

} // namespace dtc::ops::cuda
