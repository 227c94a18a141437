// The CPU kernel registry: looks kernels up by (domain, op) in Kernels.def, implements the
// KernelSpec/TensorDesc helpers, the checks shared by all op families, and the wrapper that
// validates a run's operand pointers before a kernel sees them.
#include "ops/cpu/Kernel.h"

#include "ops/cpu/OneDnnUtil.h"
#include "ops/kernel/Target.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace dtc::ops::cpu {

// ---- shared checks and helpers ---------------------------------------------------------------

Status checkArity(const KernelSpec &spec, size_t minIn, size_t maxIn, size_t outs) {
  auto range = [](size_t lo, size_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
  };
  if (spec.inputs.size() < minIn || spec.inputs.size() > maxIn)
    return spec.error("expected " + range(minIn, maxIn) + " inputs, got " +
                      std::to_string(spec.inputs.size()));
  if (spec.outputs.size() != outs)
    return spec.error("expected " + std::to_string(outs) + " output(s), got " +
                      std::to_string(spec.outputs.size()));
  for (size_t i = 0; i < minIn; ++i)
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is required");
  for (size_t i = 0; i < outs; ++i)
    if (!spec.outputs[i].present())
      return spec.error("output " + std::to_string(i) + " has no dtype");
  return Status::ok();
}

Status checkDType(const KernelSpec &spec, bool input, size_t index,
                  const std::vector<ir::DType> &allowed) {
  const TensorDesc &t = input ? spec.inputs.at(index) : spec.outputs.at(index);
  if (std::find(allowed.begin(), allowed.end(), t.dtype) != allowed.end())
    return Status::ok();
  std::string names;
  for (size_t i = 0; i < allowed.size(); ++i)
    names +=
        std::string(i ? (i + 1 == allowed.size() ? " or " : ", ") : "") + ir::dtypeName(allowed[i]);
  return spec.error(std::string(input ? "input " : "output ") + std::to_string(index) +
                    " has dtype " + ir::dtypeName(t.dtype) + "; the CPU kernel supports " + names);
}

Status checkDenseFloatDTypes(const KernelSpec &spec) {
  const ir::DType t = spec.inputs.at(0).dtype;
  if (t == ir::DType::kFloat16)
    return spec.error("input 0 has dtype f16: fp16 compute needs a CPU with AVX512-FP16 or a GPU "
                      "(use --precision bf16)");
  if (t != ir::DType::kFloat32 && t != ir::DType::kBFloat16)
    return checkDType(spec, true, 0, {ir::DType::kFloat32, ir::DType::kBFloat16});
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present())
      DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {t}));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    DTC_RETURN_IF_ERROR(checkDType(spec, false, i, {t}));
  return Status::ok();
}

dnnl::memory::data_type dnnlFloatType(ir::DType t) {
  switch (t) {
  case ir::DType::kBFloat16:
    return dnnl::memory::data_type::bf16;
  case ir::DType::kFloat16:
    return dnnl::memory::data_type::f16;
  default:
    return dnnl::memory::data_type::f32;
  }
}

Status checkShapes(const KernelSpec &spec, size_t maxRank) {
  auto one = [&](const TensorDesc &t, const std::string &what) -> Status {
    if (!t.present())
      return Status::ok();
    if (t.shape.size() > maxRank)
      return spec.error(what + " has rank " + std::to_string(t.shape.size()) +
                        "; the CPU kernel supports rank <= " + std::to_string(maxRank));
    auto n = ir::checkedProduct(t.shape);
    int64_t size = ir::dtypeSize(t.dtype);
    if (!n || size <= 0 || *n > std::numeric_limits<int64_t>::max() / size)
      return spec.error(what + " has an invalid shape or dtype " + t.str());
    return Status::ok();
  };
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(one(spec.inputs[i], "input " + std::to_string(i)));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    DTC_RETURN_IF_ERROR(one(spec.outputs[i], "output " + std::to_string(i)));
  return Status::ok();
}

Status checkOutputShape(const KernelSpec &spec, const std::vector<int64_t> &expected) {
  if (spec.outputs.at(0).shape != expected)
    return spec.error("output 0 has shape " + shapeStr(spec.outputs[0].shape) + ", expected " +
                      shapeStr(expected));
  return Status::ok();
}

bool broadcastShapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                     std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

dnnl::memory::dims dnnlDims(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return {1};
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::desc plainDesc(const std::vector<int64_t> &shape, dnnl::memory::data_type dt) {
  dnnl::memory::dims dims = dnnlDims(shape);
  std::vector<int64_t> s = rowMajorStrides(std::vector<int64_t>(dims.begin(), dims.end()));
  return dnnl::memory::desc(dims, dt, dnnl::memory::dims(s.begin(), s.end()));
}

Status dnnlStatus(const KernelSpec &spec, const dnnl::error &e) {
  return spec.error(std::string("oneDNN: ") + e.what() + " (status " +
                    std::to_string(static_cast<int>(e.status)) + ")");
}

int noInPlace(const KernelSpec &) { return -1; }

// ---- PrimitiveRunner ---------------------------------------------------------------------------

void PrimitiveRunner::input(int arg, const dnnl::memory::desc &md, size_t index) {
  dnnl::memory mem(md, ctx_->engine, DNNL_MEMORY_NONE);
  operands_.push_back({arg, Operand::Kind::kInput, index, mem});
  argMap_[arg] = mem;
}

void PrimitiveRunner::output(int arg, const dnnl::memory::desc &md, size_t index) {
  dnnl::memory mem(md, ctx_->engine, DNNL_MEMORY_NONE);
  operands_.push_back({arg, Operand::Kind::kOutput, index, mem});
  argMap_[arg] = mem;
}

void PrimitiveRunner::fixed(int arg, const dnnl::memory &mem) { argMap_[arg] = mem; }

void PrimitiveRunner::execute(const KernelArgs &args) {
  for (Operand &op : operands_) {
    void *ptr = op.kind == Operand::Kind::kInput ? const_cast<void *>(args.inputs[op.index])
                                                 : args.outputs[op.index];
    op.mem.set_data_handle(ptr);
  }
  prim_.execute(ctx_->stream, argMap_);
}

void InputReorders::bind(PrimitiveRunner &runner, CpuContext &ctx, int arg,
                         const dnnl::memory::desc &user, const dnnl::memory::desc &want,
                         size_t index, bool constant) {
  if (user == want) {
    runner.input(arg, user, index);
    return;
  }
  Entry e{index, constant, nullptr, {}};
  e.r.user = dnnl::memory(user, ctx.engine, DNNL_MEMORY_NONE);
  e.r.scratch = dnnl::memory(want, ctx.engine);
  e.r.reorder = dnnl::reorder(e.r.user, e.r.scratch);
  runner.fixed(arg, e.r.scratch);
  entries_.push_back(std::move(e));
}

void InputReorders::run(const KernelArgs &args, dnnl::stream &stream) {
  for (Entry &e : entries_) {
    const void *p = args.inputs[e.index];
    if (e.constant && e.doneFor == p)
      continue;
    e.r.user.set_data_handle(const_cast<void *>(p));
    e.r.reorder.execute(stream, e.r.user, e.r.scratch);
    e.doneFor = p;
  }
}

Status SinglePrimitiveKernel::run(const KernelArgs &args) {
  try {
    runner_.execute(args);
    ctx_.stream.wait();
  } catch (const dnnl::error &e) {
    return Status::error(where_, std::string("oneDNN: ") + e.what());
  }
  return Status::ok();
}

// ---- registry ----------------------------------------------------------------------------------

namespace {

struct Entry {
  const char *domain;
  const char *op;
  Status (*check)(const KernelSpec &);
  Expected<KernelPtr> (*create)(const KernelSpec &, CpuContext &);
  int (*inPlace)(const KernelSpec &);
  bool view;
  bool channelsLast;
};

constexpr Entry kEntries[] = {
#define DTC_CPU_KERNEL(domain, op, check, create, inPlace, view, channelsLast)                     \
  {domain, op, &check, &create, &inPlace, view, channelsLast},
#include "ops/cpu/Kernels.def"
#undef DTC_CPU_KERNEL
};

const Entry *findEntry(const std::string &domain, const std::string &op) {
  // "ai.onnx" is the same domain as "".
  const std::string d = domain == "ai.onnx" ? "" : domain;
  for (const Entry &e : kEntries)
    if (d == e.domain && op == e.op)
      return &e;
  return nullptr;
}

} // namespace

Status checkKernel(const KernelSpec &spec) {
  const Entry *e = findEntry(spec.domain, spec.op);
  if (!e) {
    std::string opName = spec.domain.empty() ? spec.op : spec.domain + "." + spec.op;
    return spec.error("no CPU kernel for op '" + opName + "'");
  }
  auto checkLayouts = [&](const std::vector<TensorDesc> &ts, const char *kind) -> Status {
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts[i].layout == Layout::kRowMajor || !ts[i].present())
        continue;
      if (!e->channelsLast)
        return spec.error(std::string(kind) + " " + std::to_string(i) +
                          " is channels-last; the CPU kernel takes row-major operands only");
      if (ts[i].shape.size() < 3)
        return spec.error(std::string(kind) + " " + std::to_string(i) +
                          " is channels-last but has rank " + std::to_string(ts[i].shape.size()) +
                          " (needs rank >= 3)");
    }
    return Status::ok();
  };
  DTC_RETURN_IF_ERROR(checkLayouts(spec.inputs, "input"));
  DTC_RETURN_IF_ERROR(checkLayouts(spec.outputs, "output"));
  spec.attrKindError.clear();
  DTC_RETURN_IF_ERROR(e->check(spec));
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  return Status::ok();
}

Expected<std::unique_ptr<Kernel>> createKernel(const KernelSpec &spec, CpuContext &ctx) {
  DTC_RETURN_IF_ERROR(checkKernel(spec));
  const Entry *e = findEntry(spec.domain, spec.op);
  return makeCheckedKernel(spec, [&]() { return e->create(spec, ctx); });
}

bool hasKernel(const std::string &domain, const std::string &op) {
  return findEntry(domain, op) != nullptr;
}

int inPlaceInput(const KernelSpec &spec) {
  const Entry *e = findEntry(spec.domain, spec.op);
  if (!e || !checkKernel(spec).isOk())
    return -1;
  return e->inPlace(spec);
}

bool isViewOp(const std::string &domain, const std::string &op) {
  const Entry *e = findEntry(domain, op);
  return e && e->view;
}

std::vector<std::string> kernelOpNames() {
  std::vector<std::pair<std::string, std::string>> names;
  for (const Entry &e : kEntries)
    names.emplace_back(e.domain, e.op);
  std::sort(names.begin(), names.end());
  std::vector<std::string> out;
  for (auto &[domain, op] : names)
    out.push_back(op);
  return out;
}

} // namespace dtc::ops::cpu

namespace dtc::ops {

namespace {

/// The CPU target answers from the CPU kernel table (ops/cpu/Kernels.def).
class CpuTarget final : public Target {
public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  uint64_t alignment() const override { return 64; }
  bool hasKernel(const std::string &domain, const std::string &op) const override {
    return cpu::hasKernel(domain, op);
  }
  Status checkKernel(const KernelSpec &spec) const override { return cpu::checkKernel(spec); }
  int inPlaceInput(const KernelSpec &spec) const override { return cpu::inPlaceInput(spec); }
  bool isViewOp(const std::string &domain, const std::string &op) const override {
    return cpu::isViewOp(domain, op);
  }
  // oneDNN's fastest convolutions on AVX-512 read and write channels-last activations.
  bool prefersChannelsLast(const std::string &op) const override {
    return op == "Conv" || op == "FusedConv";
  }
  std::vector<std::string> kernelOpNames() const override { return cpu::kernelOpNames(); }
};

} // namespace

const Target &cpuTarget() {
  static const CpuTarget target;
  return target;
}

} // namespace dtc::ops
