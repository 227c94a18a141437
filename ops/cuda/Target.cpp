// The CUDA target (ops/kernel/Target.h): answers from the CUDA kernel table (Kernels.def) with
// the families' checks. Pure C++, so `dtc-compile --device cuda` works on a machine without
// CUDA.
#include "ops/cuda/Checks.h"
#include "ops/kernel/Target.h"

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

struct Entry {
  const char *domain;
  const char *op;
  Status (*check)(const KernelSpec &);
  int (*inPlace)(const KernelSpec &);
  bool view;
};

const std::vector<Entry> &entries() {
  static const std::vector<Entry> kEntries = {
#define DTC_CUDA_KERNEL(domain, op, check, create, inPlace, view) {domain, op, &check, &inPlace, view},
#include "ops/cuda/Kernels.def"
#undef DTC_CUDA_KERNEL
  };
  return kEntries;
}

const Entry *findEntry(const std::string &domain, const std::string &op) {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  for (const Entry &e : entries())
    if (d == e.domain && op == e.op)
      return &e;
  return nullptr;
}

std::string dtypeList(const std::vector<ir::DType> &allowed) {
  std::string names;
  for (size_t i = 0; i < allowed.size(); ++i)
    names +=
        std::string(i ? (i + 1 == allowed.size() ? " or " : ", ") : "") + ir::dtypeName(allowed[i]);
  return names;
}

Status checkOne(const KernelSpec &spec, const TensorDesc &t, const std::string &what,
                const std::vector<ir::DType> &allowed) {
  if (!t.present() || std::find(allowed.begin(), allowed.end(), t.dtype) != allowed.end())
    return Status::ok();
  return spec.error(what + " has dtype " + ir::dtypeName(t.dtype) + "; the CUDA kernel supports " +
                    dtypeList(allowed));
}

class CudaTarget final : public Target {
public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  // cudaMalloc's own alignment: every buffer starts on a 256-byte boundary, which the vector
  // loads of the hand-written kernels and cuBLAS/cuDNN's fastest paths want.
  uint64_t alignment() const override { return 256; }
  bool hasKernel(const std::string &domain, const std::string &op) const override {
    return findEntry(domain, op) != nullptr;
  }
  Status checkKernel(const KernelSpec &spec) const override {
    const Entry *e = findEntry(spec.domain, spec.op);
    if (!e) {
      std::string opName = spec.domain.empty() ? spec.op : spec.domain + "." + spec.op;
      return spec.error("no CUDA kernel for op '" + opName + "' (--device cuda)");
    }
    auto rowMajor = [&](const std::vector<TensorDesc> &ts, const char *kind) -> Status {
      for (size_t i = 0; i < ts.size(); ++i)
        if (ts[i].present() && ts[i].layout != Layout::kRowMajor)
          return spec.error(std::string(kind) + " " + std::to_string(i) +
                            " is channels-last; the CUDA kernels take row-major operands only");
      return Status::ok();
    };
    DTC_RETURN_IF_ERROR(rowMajor(spec.inputs, "input"));
    DTC_RETURN_IF_ERROR(rowMajor(spec.outputs, "output"));
    // What the spec means (arity, shapes, attributes) does not depend on the backend: the CPU
    // target's check proves it, so the CUDA kernels may rely on a consistent spec.
    DTC_RETURN_IF_ERROR(cpuTarget().checkKernel(spec));
    spec.attrKindError.clear();
    DTC_RETURN_IF_ERROR(e->check(spec));
    if (!spec.attrKindError.empty())
      return spec.error(spec.attrKindError);
    return Status::ok();
  }
  int inPlaceInput(const KernelSpec &spec) const override {
    const Entry *e = findEntry(spec.domain, spec.op);
    if (!e || !checkKernel(spec).isOk())
      return -1;
    return e->inPlace(spec);
  }
  bool isViewOp(const std::string &domain, const std::string &op) const override {
    const Entry *e = findEntry(domain, op);
    return e && e->view;
  }
  // cuDNN's fp32 convolutions are fastest on NCHW; channels-last pays off with tensor cores in
  // half precision only.
  bool prefersChannelsLast(const std::string &) const override { return false; }
  std::vector<std::string> kernelOpNames() const override {
    std::vector<std::pair<std::string, std::string>> names;
    for (const Entry &e : entries())
      names.emplace_back(e.domain, e.op);
    std::sort(names.begin(), names.end());
    std::vector<std::string> out;
    for (auto &[domain, op] : names)
      out.push_back(op);
    return out;
  }
};

} // namespace

Status checkDTypes(const KernelSpec &spec, const std::vector<ir::DType> &allowed) {
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkOne(spec, spec.inputs[i], "input " + std::to_string(i), allowed));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkOne(spec, spec.outputs[i], "output " + std::to_string(i), allowed));
  return Status::ok();
}

Status checkInputDType(const KernelSpec &spec, size_t index,
                       const std::vector<ir::DType> &allowed) {
  if (index >= spec.inputs.size())
    return Status::ok();
  return checkOne(spec, spec.inputs[index], "input " + std::to_string(index), allowed);
}

Status checkOutputDType(const KernelSpec &spec, size_t index,
                        const std::vector<ir::DType> &allowed) {
  if (index >= spec.outputs.size())
    return Status::ok();
  return checkOne(spec, spec.outputs[index], "output " + std::to_string(index), allowed);
}

int sameAsInput0(const KernelSpec &spec) {
  if (spec.inputs.empty() || spec.outputs.empty() || !spec.inputs[0].present())
    return -1;
  const TensorDesc &in = spec.inputs[0], &out = spec.outputs[0];
  return in.dtype == out.dtype && in.byteSize() == out.byteSize() ? 0 : -1;
}

int noInPlace(const KernelSpec &) { return -1; }

} // namespace dtc::ops::cuda

namespace dtc::ops {

const Target &cudaTarget() {
  static const cuda::CudaTarget target;
  return target;
}

} // namespace dtc::ops
