// OpDef builders, contexts, form and type-constraint checks.
#include "ops/OpDef.h"

#include <algorithm>
#include <climits>

namespace dtc::ops {

std::string typeMaskText(TypeMask m) {
  std::string out;
  for (int n = 0; n <= 16; ++n)
    if (ir::isKnownDType(n) && (m & (TypeMask{1} << n)))
      out += (out.empty() ? "" : ", ") + std::string(ir::dtypeName(static_cast<ir::DType>(n)));
  return out;
}

OpVersion &OpVersion::in(const std::string &name, const std::string &typeVar) {
  inputs.push_back({name, typeVar, false, false});
  return *this;
}
OpVersion &OpVersion::optIn(const std::string &name, const std::string &typeVar) {
  inputs.push_back({name, typeVar, true, false});
  return *this;
}
OpVersion &OpVersion::variadicIn(const std::string &name, const std::string &typeVar) {
  inputs.push_back({name, typeVar, false, true});
  return *this;
}
OpVersion &OpVersion::out(const std::string &name, const std::string &typeVar) {
  outputs.push_back({name, typeVar, false, false});
  return *this;
}
OpVersion &OpVersion::optOut(const std::string &name, const std::string &typeVar) {
  outputs.push_back({name, typeVar, true, false});
  return *this;
}
OpVersion &OpVersion::attr(const std::string &name, ir::AttrKind kind, bool required) {
  attrs.erase(std::remove_if(attrs.begin(), attrs.end(),
                             [&](const AttrSpec &a) { return a.name == name; }),
              attrs.end());
  attrs.push_back({name, kind, required});
  return *this;
}
OpVersion &OpVersion::type(const std::string &typeVar, TypeMask allowed) {
  typeVars[typeVar] = allowed;
  return *this;
}

static size_t countRequired(const std::vector<ArgSpec> &args) {
  size_t n = 0;
  for (const ArgSpec &a : args)
    if (!a.optional)
      ++n;
  return n;
}
size_t OpVersion::minInputs() const { return countRequired(inputs); }
size_t OpVersion::maxInputs() const {
  return !inputs.empty() && inputs.back().variadic ? SIZE_MAX : inputs.size();
}
size_t OpVersion::minOutputs() const { return countRequired(outputs); }
size_t OpVersion::maxOutputs() const {
  return !outputs.empty() && outputs.back().variadic ? SIZE_MAX : outputs.size();
}
const AttrSpec *OpVersion::findAttr(const std::string &name) const {
  for (const AttrSpec &a : attrs)
    if (a.name == name)
      return &a;
  return nullptr;
}

OpVersion &OpDef::version(int since) {
  OpVersion v = versions.empty() ? OpVersion{} : versions.back();
  v.since = since;
  versions.push_back(std::move(v));
  return versions.back();
}

const OpVersion *OpDef::versionFor(int64_t opset) const {
  const OpVersion *found = nullptr;
  for (const OpVersion &v : versions)
    if (v.since <= opset)
      found = &v;
  return found;
}

// --- NormalizeContext ------------------------------------------------------------------------

ir::Value *NormalizeContext::int64Constant(const ir::Node &node, const std::string &what,
                                           const std::vector<int64_t> &values, bool scalar) {
  std::vector<int64_t> dims;
  if (!scalar)
    dims.push_back(static_cast<int64_t>(values.size()));
  std::string name = (node.name().empty() ? node.opType() : node.name()) + "." + what;
  return graph_.addConstant(name, ir::TensorData::fromInt64s(name, dims, values));
}

ir::Value *NormalizeContext::floatConstant(const ir::Node &node, const std::string &what,
                                           const std::vector<float> &values, bool scalar) {
  std::vector<int64_t> dims;
  if (!scalar)
    dims.push_back(static_cast<int64_t>(values.size()));
  std::string name = (node.name().empty() ? node.opType() : node.name()) + "." + what;
  return graph_.addConstant(name, ir::TensorData::fromFloats(name, dims, values));
}

void NormalizeContext::attrToInput(ir::Node &node, const std::string &attrName, size_t index) {
  const ir::Attribute *a = node.attr(attrName);
  if (!a)
    return;
  std::vector<int64_t> values = a->kind() == ir::AttrKind::kInts ? a->ints()
                                : a->kind() == ir::AttrKind::kInt ? std::vector<int64_t>{a->i()}
                                                                  : std::vector<int64_t>{};
  ir::Value *c = int64Constant(node, attrName, values);
  node.removeAttr(attrName);
  while (node.numInputs() < index)
    node.addInput(nullptr);
  if (node.numInputs() == index)
    node.addInput(c);
  else
    node.setInput(index, c);
}

// --- InferenceContext ------------------------------------------------------------------------

ir::TensorDataPtr InferenceContext::constantInput(size_t i) const {
  const ir::Value *v = node_.input(i);
  // Parameters with a default value (initializers listed as inputs, as exports with
  // keep_initializers_as_inputs have for every weight and shape tensor) count as constants.
  if (!v || !v->isInitializer())
    return nullptr;
  return v->initializer();
}

const std::vector<ir::Dim> *InferenceContext::shapeValue(size_t i) {
  const ir::Value *v = node_.input(i);
  if (!v)
    return nullptr;
  auto it = shapeValues_.find(v);
  if (it != shapeValues_.end())
    return &it->second;
  auto cached = constantCache_.find(i);
  if (cached != constantCache_.end())
    return &cached->second;
  ir::TensorDataPtr c = constantInput(i);
  if (!c || c->dims().size() > 1 || c->numElements() > 1024 ||
      !(ir::isInteger(c->dtype()) || c->dtype() == ir::DType::kBool))
    return nullptr;
  auto ints = c->toInt64s();
  if (!ints)
    return nullptr;
  std::vector<ir::Dim> dims;
  for (int64_t x : *ints)
    dims.push_back(ir::Dim::fixed(x));
  return &(constantCache_[i] = std::move(dims));
}

Expected<std::vector<int64_t>> InferenceContext::constantInts(size_t i, const std::string &what) {
  ir::TensorDataPtr c = constantInput(i);
  if (!c)
    return error(what + " must be a constant (an initializer or Constant node)");
  auto ints = c->toInt64s();
  if (!ints)
    return error(what + ": " + ints.status().message());
  return ints;
}

void InferenceContext::setShapeValue(size_t i, std::vector<ir::Dim> elements) {
  shapeValues_[node_.output(i)] = std::move(elements);
}

void InferenceContext::setOutputShape(size_t i, ir::Shape shape) {
  node_.output(i)->type().shape = std::move(shape);
}

void InferenceContext::setOutputDType(size_t i, ir::DType t) { node_.output(i)->type().dtype = t; }

// --- Checks ----------------------------------------------------------------------------------

Status checkForm(const ir::Node &node, const OpVersion &v, int64_t opset) {
  std::string where = node.where();
  std::string inOpset = " in opset " + std::to_string(opset);
  size_t nIn = node.numInputs();
  // Trailing omitted optional inputs do not count.
  while (nIn > 0 && !node.input(nIn - 1))
    --nIn;
  if (nIn < v.minInputs())
    return Status::error(where, "expects at least " + std::to_string(v.minInputs()) +
                                    " inputs" + inOpset + ", got " + std::to_string(nIn));
  if (nIn > v.maxInputs())
    return Status::error(where, "expects at most " + std::to_string(v.maxInputs()) +
                                    " inputs" + inOpset + ", got " + std::to_string(nIn));
  for (size_t i = 0; i < nIn && i < v.inputs.size(); ++i)
    if (!node.input(i) && !v.inputs[i].optional)
      return Status::error(where, "required input " + std::to_string(i) + " ('" +
                                      v.inputs[i].name + "') is missing");
  size_t nOut = node.numOutputs();
  if (nOut < v.minOutputs() || nOut > v.maxOutputs())
    return Status::error(where, "has " + std::to_string(nOut) + " outputs; expects " +
                                    (v.maxOutputs() == SIZE_MAX
                                         ? "at least " + std::to_string(v.minOutputs())
                                         : std::to_string(v.minOutputs()) + " to " +
                                               std::to_string(v.maxOutputs())) +
                                    inOpset);
  for (const auto &[name, a] : node.attributes()) {
    const AttrSpec *spec = v.findAttr(name);
    if (!spec)
      return Status::error(where, "attribute '" + name + "' is not allowed for " + node.opType() +
                                      inOpset);
    if (spec->kind != a.kind())
      return Status::error(where, "attribute '" + name + "' must be " +
                                      ir::attrKindName(spec->kind) + ", got " +
                                      ir::attrKindName(a.kind()));
  }
  for (const AttrSpec &spec : v.attrs)
    if (spec.required && !node.hasAttr(spec.name))
      return Status::error(where, "required attribute '" + spec.name + "' is missing");
  return Status::ok();
}

Status checkTypesAndSetOutputDTypes(ir::Node &node, const OpVersion &canonical) {
  std::map<std::string, ir::DType> bound;
  for (size_t i = 0; i < node.numInputs(); ++i) {
    const ir::Value *v = node.input(i);
    if (!v)
      continue;
    const ArgSpec &spec = canonical.inputs[std::min(i, canonical.inputs.size() - 1)];
    ir::DType t = v->dtype();
    if (t == ir::DType::kUndefined)
      continue;
    auto allowed = canonical.typeVars.find(spec.typeVar);
    if (allowed != canonical.typeVars.end() && !(allowed->second & bit(t)))
      return Status::error(node.where(), "input " + std::to_string(i) + " ('" + spec.name +
                                             "', value '" + v->name() + "') has type " +
                                             ir::dtypeName(t) + "; allowed: " +
                                             typeMaskText(allowed->second));
    auto [it, inserted] = bound.emplace(spec.typeVar, t);
    if (!inserted && it->second != t)
      return Status::error(node.where(), "input " + std::to_string(i) + " ('" + spec.name +
                                             "') has type " + ir::dtypeName(t) +
                                             " but another input bound to the same type " +
                                             spec.typeVar + " has " + ir::dtypeName(it->second));
  }
  for (size_t i = 0; i < node.numOutputs() && !canonical.outputs.empty(); ++i) {
    // A variadic last output (Split) gives its type to every output from there on.
    if (i >= canonical.outputs.size() && !canonical.outputs.back().variadic)
      break;
    const ArgSpec &spec = canonical.outputs[std::min(i, canonical.outputs.size() - 1)];
    auto it = bound.find(spec.typeVar);
    if (it != bound.end())
      node.output(i)->type().dtype = it->second;
    else {
      auto allowed = canonical.typeVars.find(spec.typeVar);
      // A type variable that admits exactly one type fixes the output dtype.
      if (allowed != canonical.typeVars.end() && __builtin_popcount(allowed->second) == 1)
        node.output(i)->type().dtype =
            static_cast<ir::DType>(__builtin_ctz(allowed->second));
    }
  }
  return Status::ok();
}

} // namespace dtc::ops
