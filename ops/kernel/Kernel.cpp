// The backend-neutral kernel types: TensorDesc and KernelSpec helpers, the attribute accessors.
#include "ops/kernel/Kernel.h"

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

} // namespace dtc::ops
