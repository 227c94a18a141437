// Shared pieces of the nn operator definitions: attribute checks, window attributes and the
// sliding-window output length with symbolic sizes, node replacement for normalizations.
#include "ops/nn/NNCommon.h"

#include "ops/ShapeHelpers.h"

#include <cmath>
#include <limits>

namespace dtc::ops::nn {

namespace {

std::string joinInts(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

} // namespace

Status checkStringAttr(const ir::Node &node, const std::string &name,
                       const std::vector<std::string> &allowed) {
  const ir::Attribute *a = node.attr(name);
  if (!a || a->kind() != ir::AttrKind::kString)
    return Status::ok();
  for (const std::string &s : allowed)
    if (a->s() == s)
      return Status::ok();
  std::string list;
  for (const std::string &s : allowed)
    list += (list.empty() ? "" : ", ") + s;
  return Status::error(node.where(),
                       "attribute " + name + "=\"" + a->s() + "\" is not one of: " + list);
}

Expected<Window> readWindow(const ir::Node &node, size_t spatial, std::vector<int64_t> kernel) {
  Window w;
  std::string where = node.where();
  DTC_RETURN_IF_ERROR(
      checkStringAttr(node, "auto_pad", {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}));
  w.autoPad = node.attrString("auto_pad", "NOTSET");
  w.kernel = std::move(kernel);
  if (w.kernel.size() != spatial)
    return Status::error(where, "kernel_shape " + joinInts(w.kernel) + " has " +
                                    std::to_string(w.kernel.size()) + " values; expected " +
                                    std::to_string(spatial) + " (one per spatial axis)");
  for (int64_t k : w.kernel)
    if (k < 1)
      return Status::error(where, "kernel_shape " + joinInts(w.kernel) + " must be positive");
  auto readPositive = [&](const std::string &name, std::vector<int64_t> &out) -> Status {
    out = node.attrInts(name, std::vector<int64_t>(spatial, 1));
    if (out.size() != spatial)
      return Status::error(where, name + " " + joinInts(out) + " has " +
                                      std::to_string(out.size()) + " values; expected " +
                                      std::to_string(spatial));
    for (int64_t s : out)
      if (s < 1)
        return Status::error(where, name + " " + joinInts(out) + " must be positive");
    return Status::ok();
  };
  DTC_RETURN_IF_ERROR(readPositive("strides", w.strides));
  DTC_RETURN_IF_ERROR(readPositive("dilations", w.dilations));
  w.pads = node.attrInts("pads", std::vector<int64_t>(2 * spatial, 0));
  if (w.pads.size() != 2 * spatial)
    return Status::error(where, "pads " + joinInts(w.pads) + " has " +
                                    std::to_string(w.pads.size()) + " values; expected " +
                                    std::to_string(2 * spatial) + " (begin and end per axis)");
  for (int64_t p : w.pads)
    if (p < 0)
      return Status::error(where, "pads " + joinInts(w.pads) + " must be non-negative");
  if (w.autoPad != "NOTSET" && node.hasAttr("pads")) {
    bool allZero = true;
    for (int64_t p : w.pads)
      allZero = allZero && p == 0;
    if (!allZero)
      return Status::error(where, "pads and auto_pad=" + w.autoPad + " cannot both be given");
  }
  if (w.autoPad == "VALID")
    w.pads.assign(2 * spatial, 0);
  return w;
}

ir::Dim affineDim(const ir::Dim &in, int64_t a, int64_t b) {
  if (in.isStatic())
    return ir::Dim::fixed(a * in.value() + b);
  if (in.isSymbolic() && b == 0)
    return in * ir::Dim::fixed(a);
  return ir::Dim::unknown();
}

Expected<ir::Dim> windowOutputDim(const ir::Dim &in, const Window &w, size_t i, bool ceilMode,
                                  const std::string &where) {
  int64_t stride = w.strides[i];
  if (w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER") {
    if (in.isStatic()) // ceil(in / stride) without overflowing in + stride - 1
      return ir::Dim::fixed(in.value() / stride + (in.value() % stride != 0 ? 1 : 0));
    return stride == 1 ? in : ir::Dim::unknown();
  }
  size_t n = w.kernel.size();
  DTC_ASSIGN_OR_RETURN(ir::Dim out,
                       slidingWindowDim(in, w.kernel[i], stride, w.pads[i], w.pads[i + n],
                                        w.dilations[i], ceilMode, where));
  if (!in.isStatic() && stride == 1) {
    // slidingWindowDim succeeded, so the effective window and the pads each fit in int64.
    __int128 effective = __int128(w.dilations[i]) * (w.kernel[i] - 1) + 1;
    __int128 offset = __int128(w.pads[i]) + w.pads[i + n] - effective + 1;
    if (offset > std::numeric_limits<int64_t>::max() ||
        offset < std::numeric_limits<int64_t>::min())
      return Status::error(where,
                           "pads on spatial axis " + std::to_string(i) + " are larger than int64");
    return affineDim(in, 1, static_cast<int64_t>(offset));
  }
  return out;
}

ir::Node *replaceNode(ir::Graph &g, ir::Node *old, const std::string &opType,
                      const std::vector<ir::Value *> &inputs,
                      const std::map<std::string, ir::Attribute> &attrs) {
  // The new node takes over the old node's name: a temporary node holds the outputs while the
  // old one is erased (which frees its name), then the final node is created under that name.
  std::string name = old->name();
  ir::Phase phase = old->phase();
  ir::Node *tmp = g.insertNodeBefore(old, opType, {}, {}, old->domain(), name + ".tmp");
  g.transferOutputs(old, tmp);
  g.eraseNode(old);
  ir::Node *n = g.insertNodeBefore(tmp, opType, inputs, {}, "", name);
  g.transferOutputs(tmp, n);
  g.eraseNode(tmp);
  for (const auto &[key, value] : attrs)
    n->setAttr(key, value);
  n->setPhase(phase);
  return n;
}

bool isEmptyTensor(const ir::Value *v) {
  if (!v)
    return false;
  if (v->isInitializer())
    return v->initializer()->numElements() == 0;
  const ir::Shape &s = v->shape();
  if (!s.hasRank())
    return false;
  for (const ir::Dim &d : s.dims())
    if (d.isStatic() && d.value() == 0)
      return true;
  return false;
}

void dropTrailingOmittedInputs(ir::Node &node) {
  size_t n = node.numInputs();
  while (n > 0 && !node.input(n - 1))
    --n;
  node.truncateInputs(n);
}

} // namespace dtc::ops::nn

namespace dtc::ops::nn {

Status inferPool(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  const ir::Shape &x = ctx.inputShape(0);
  std::vector<int64_t> kernel = node.attrInts("kernel_shape");
  if (kernel.empty())
    return ctx.error("required attribute 'kernel_shape' is missing");
  if (x.hasRank() && x.rank() < 3)
    return ctx.error("X must have rank >= 3 (N, C, spatial...), got " + x.str());
  size_t spatial = x.hasRank() ? x.rank() - 2 : kernel.size();
  DTC_ASSIGN_OR_RETURN(Window win, readWindow(node, spatial, kernel));
  for (size_t i = 0; i < spatial; ++i)
    if (win.pads[i] >= win.kernel[i] || win.pads[i + spatial] >= win.kernel[i])
      return ctx.error("pads must be smaller than the kernel on spatial axis " + std::to_string(i) +
                       " (kernel " + std::to_string(win.kernel[i]) + ")");
  int64_t ceilMode = node.attrInt("ceil_mode", 0);
  if (ceilMode != 0 && ceilMode != 1)
    return ctx.error("ceil_mode must be 0 or 1, got " + std::to_string(ceilMode));
  ir::Shape out;
  if (x.hasRank()) {
    std::vector<ir::Dim> dims = {x[0], x[1]};
    for (size_t i = 0; i < spatial; ++i) {
      DTC_ASSIGN_OR_RETURN(ir::Dim d,
                           windowOutputDim(x[2 + i], win, i, ceilMode != 0, node.where()));
      dims.push_back(d);
    }
    out = ir::Shape(std::move(dims));
  }
  for (size_t i = 0; i < node.numOutputs() && i < 2; ++i)
    ctx.setOutputShape(i, out);
  return Status::ok();
}

} // namespace dtc::ops::nn

namespace dtc::ops::nn {

ir::Dim scaledDim(const ir::Dim &in, float scale) {
  if (in.isStatic()) {
    float size = std::floor(static_cast<float>(in.value()) * scale);
    // Callers reject such scales; never convert an out-of-range float (undefined behavior).
    if (!(size >= 0.0f && size < 9.2e18f))
      return ir::Dim::unknown();
    return ir::Dim::fixed(static_cast<int64_t>(size));
  }
  float whole = std::floor(scale);
  if (in.isSymbolic() && whole == scale && whole >= 1.0f && whole < 1e9f)
    return affineDim(in, static_cast<int64_t>(whole), 0);
  return ir::Dim::unknown();
}

CostFn poolCost(bool windowsFromInput, double extraPerWindow) {
  return [=](const CostContext &ctx) -> Expected<Cost> {
    double k = 1;
    for (int64_t v : ctx.node().attrInts("kernel_shape"))
      k *= static_cast<double>(v);
    double windows = windowsFromInput ? ctx.inputElements(0) : ctx.outputElements(0);
    return ctx.withFlops(windows * (k + extraPerWindow));
  };
}

double resizeFlops(const std::string &mode, const std::vector<int64_t> &in,
                   const std::vector<int64_t> &out, bool adjoint) {
  double elements = 1;
  for (int64_t v : out)
    elements *= static_cast<double>(v);
  if (mode == "nearest")
    return adjoint ? elements : 0;
  double taps = 1;
  for (size_t i = 0; i < in.size() && i < out.size(); ++i)
    if (in[i] != out[i])
      taps *= mode == "cubic" ? 4 : 2;
  return 2 * taps * elements;
}

double batchNormTrainingFlops(double elements, double channels, int runningOutputs) {
  return 8 * elements + (4 + 3 * runningOutputs) * channels;
}

Expected<double> layerNormRows(const CostContext &ctx, size_t input) {
  const std::vector<int64_t> &x = ctx.inputDims(input);
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = ctx.node().attrInt("axis", -1);
  axis = axis < 0 ? axis + r : axis;
  if (axis < 0 || axis >= r)
    return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(r));
  double rows = 1;
  for (int64_t i = 0; i < axis; ++i)
    rows *= static_cast<double>(x[static_cast<size_t>(i)]);
  return rows;
}

} // namespace dtc::ops::nn
