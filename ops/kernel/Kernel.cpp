// The backend-neutral kernel types: TensorDesc and KernelSpec helpers, the attribute accessors.
#include "ops/kernel/Kernel.h"

#include <algorithm>

namespace dtc::ops {

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- TensorDesc / KernelSpec ---------------------------------------------------------------

int64_t TensorDesc::numElements() const {
  auto n = ir::checkedProduct(shape);
  return n ? *n : 0;
}

const char *layoutName(Layout l) {
  return l == Layout::kChannelsLast ? "channels-last" : "row-major";
}

std::string TensorDesc::str() const {
  std::string s = std::string(ir::dtypeName(dtype)) + shapeStr(shape);
  return layout == Layout::kRowMajor ? s : s + " " + layoutName(layout);
}

std::string KernelSpec::where() const {
  std::string opName = domain.empty() ? op : domain + "." + op;
  return "node '" + node + "' (" + opName + ")";
}

// Accessors return the default when the attribute is absent. An attribute of another kind is
// a plan error (a hand-edited plan, or a compiler bug): the accessor returns the default and
// records the mismatch, which checkKernel and createKernel report.
namespace {

const ir::Attribute *findAttr(const KernelSpec &spec, const std::string &name, ir::AttrKind kind) {
  auto it = spec.attrs.find(name);
  if (it == spec.attrs.end())
    return nullptr;
  if (it->second.kind() != kind) {
    if (spec.attrKindError.empty())
      spec.attrKindError = "attribute '" + name + "' is " + ir::attrKindName(it->second.kind()) +
                           ", expected " + ir::attrKindName(kind);
    return nullptr;
  }
  return &it->second;
}

} // namespace

int64_t KernelSpec::attrInt(const std::string &name, int64_t dflt) const {
  const ir::Attribute *a = findAttr(*this, name, ir::AttrKind::kInt);
  return a ? a->i() : dflt;
}

float KernelSpec::attrFloat(const std::string &name, float dflt) const {
  const ir::Attribute *a = findAttr(*this, name, ir::AttrKind::kFloat);
  return a ? a->f() : dflt;
}

std::string KernelSpec::attrString(const std::string &name, const std::string &dflt) const {
  const ir::Attribute *a = findAttr(*this, name, ir::AttrKind::kString);
  return a ? a->s() : dflt;
}

std::vector<int64_t> KernelSpec::attrInts(const std::string &name,
                                          std::vector<int64_t> dflt) const {
  const ir::Attribute *a = findAttr(*this, name, ir::AttrKind::kInts);
  return a ? a->ints() : dflt;
}

std::vector<float> KernelSpec::attrFloats(const std::string &name, std::vector<float> dflt) const {
  const ir::Attribute *a = findAttr(*this, name, ir::AttrKind::kFloats);
  return a ? a->floats() : dflt;
}

// ---- the wrapper every backend's kernels get -----------------------------------------------

namespace {

/// Checks a run's operand pointers against the spec, then runs the kernel with an input array
/// as long as spec.inputs (omitted trailing optional inputs filled with nullptr).
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
    // Nothing to compute for empty outputs (a zero-sized dim).
    bool anyOutput =
        std::any_of(outputBytes_.begin(), outputBytes_.end(), [](int64_t b) { return b > 0; });
    if (!anyOutput)
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

/// Stands in for a kernel whose outputs are all empty.
class NoOpKernel : public Kernel {
public:
  Status run(const KernelArgs &) override { return Status::ok(); }
};

} // namespace

Expected<KernelPtr> makeCheckedKernel(const KernelSpec &spec,
                                      const std::function<Expected<KernelPtr>()> &create) {
  const bool anyOutput = std::any_of(spec.outputs.begin(), spec.outputs.end(),
                                     [](const TensorDesc &t) { return t.byteSize() > 0; });
  KernelPtr inner;
  if (!anyOutput) {
    inner = std::make_unique<NoOpKernel>();
  } else {
    DTC_ASSIGN_OR_RETURN(inner, create());
    if (!spec.attrKindError.empty())
      return spec.error(spec.attrKindError);
  }
  return KernelPtr(std::make_unique<CheckedKernel>(spec, std::move(inner)));
}

} // namespace dtc::ops
