// Split: cuts the input along `axis` into several outputs. Forms: `split` sizes attribute (2),
// negative axis (11), `split` as an optional int64 input (13), `num_outputs` attribute (18,
// canonical: exactly one of `split` / `num_outputs`; uneven chunks per the opset-18 rule, the
// last chunk smaller). Older forms without sizes get num_outputs = number of outputs.
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

#include "ops/ShapeHelpers.h"

#include <algorithm>

namespace dtc::ops {
namespace {

/// Checks the split/num_outputs combination of a canonical node.
Status checkSizesSpec(const ir::Node &node, bool hasSplitInput) {
  bool hasNum = node.hasAttr("num_outputs");
  if (hasSplitInput && hasNum)
    return Status::error(node.where(), "either input 'split' or attribute 'num_outputs' may be "
                                       "given, not both");
  if (!hasSplitInput && !hasNum)
    return Status::error(node.where(), "either input 'split' or attribute 'num_outputs' must be "
                                       "given");
  if (hasNum && node.attrInt("num_outputs", 0) != static_cast<int64_t>(node.numOutputs()))
    return Status::error(node.where(),
                         "num_outputs is " + std::to_string(node.attrInt("num_outputs", 0)) +
                             " but the node has " + std::to_string(node.numOutputs()) + " outputs");
  return Status::ok();
}

} // namespace

namespace {

/// A split on another axis passes to every output. A split on the split axis works when the
/// axis holds one block per output (a fused Q/K/V projection split with blocks = 3): each
/// output is then split in T, and the sizes input carries the local sizes.
Status splitSharding(ShardingContext &ctx) {
  const ir::Sharding &s = ctx.input(0);
  if (!s.isSplit())
    return Status::ok();
  const int64_t rank = static_cast<int64_t>(ctx.inputDims(0).size());
  int64_t axis = ctx.node().attrInt("axis", 0);
  if (axis < 0)
    axis += rank;
  if (s.axis != axis) {
    ctx.require(0, s);
    for (size_t j = 0; j < ctx.numOutputs(); ++j)
      ctx.setOutput(j, s);
    return Status::ok();
  }
  const size_t n = ctx.numOutputs();
  if (s.blocks != static_cast<int64_t>(n))
    return Status::ok();
  for (size_t j = 0; j < n; ++j)
    if (ctx.outputDims(j)[static_cast<size_t>(axis)] * static_cast<int64_t>(n) !=
        ctx.inputDims(0)[static_cast<size_t>(axis)])
      return Status::ok(); // unequal parts
  if (ctx.numInputs() > 1 && ctx.hasInput(1)) {
    std::optional<std::vector<int64_t>> sizes = ctx.constantInts(1);
    if (!sizes)
      return Status::ok();
    for (int64_t &x : *sizes)
      x /= s.parts;
    ctx.replaceConstant(1, *sizes);
  }
  ctx.require(0, s);
  for (size_t j = 0; j < n; ++j)
    ctx.setOutput(j, ir::Sharding::split(axis, s.parts));
  return Status::ok();
}

} // namespace

OpDef defineSplit() {
  OpDef d;
  d.name = "Split";
  OpVersion &v2 = d.version(2);
  v2.in("input", "T")
      .attr("axis", ir::AttrKind::kInt)
      .attr("split", ir::AttrKind::kInts)
      .type("T", kAllTypes);
  v2.outputs.push_back({"outputs", "T", false, true});
  d.version(11);
  OpVersion &v13 = d.version(13);
  v13.attrs.clear();
  v13.attr("axis", ir::AttrKind::kInt).optIn("split", "TSplit").type("TSplit", kInt64Type);
  d.version(18).attr("num_outputs", ir::AttrKind::kInt);
  d.normalize = [](ir::Node &node, NormalizeContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(rejectNegativeAttrBefore11(node, ctx.opset(), "axis"));
    if (ctx.opset() < 13)
      ctx.attrToInput(node, "split", 1);
    if (ctx.opset() < 18 && !node.input(1))
      node.setAttr("num_outputs", static_cast<int64_t>(node.numOutputs()));
    return Status::ok();
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Node &node = ctx.node();
    bool hasSplit = ctx.hasInput(1);
    DTC_RETURN_IF_ERROR(checkSizesSpec(node, hasSplit));
    int64_t n = static_cast<int64_t>(node.numOutputs());
    // The type constraints set only output 0 (the outputs are variadic).
    for (int64_t i = 0; i < n; ++i)
      ctx.setOutputDType(i, ctx.inputDType(0));
    const ir::Shape &in = ctx.inputShape(0);
    if (!in.hasRank())
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(
        int64_t axis,
        normalizeAxis(node.attrInt("axis", 0), static_cast<int64_t>(in.rank()), node.where()));
    std::optional<std::vector<int64_t>> split;
    if (hasSplit) {
      const ir::Shape &splitShape = ctx.inputShape(1);
      if (splitShape.hasRank() && splitShape.rank() != 1)
        return ctx.error("input 'split' must be 1-D, got shape " + splitShape.str());
      split = staticInts(ctx, 1);
    }
    const ir::Dim &dim = in[axis];
    std::vector<ir::Dim> sizes(static_cast<size_t>(n), ir::Dim::unknown());
    if (dim.isStatic() && (split || !hasSplit)) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> s, splitSizes(dim.value(), split, n, node.where()));
      for (int64_t i = 0; i < n; ++i)
        sizes[i] = ir::Dim::fixed(s[i]);
    } else if (split) {
      if (static_cast<int64_t>(split->size()) != n)
        return ctx.error("split " + intsText(*split) + " has " + std::to_string(split->size()) +
                         " entries but the node has " + std::to_string(n) + " outputs");
      for (int64_t i = 0; i < n; ++i)
        sizes[i] = ir::Dim::fixed((*split)[i]);
    } else if (!hasSplit) {
      if (std::optional<ir::Dim> q = dim.dividedBy(ir::Dim::fixed(n)))
        std::fill(sizes.begin(), sizes.end(), *q);
    }
    for (int64_t i = 0; i < n; ++i) {
      std::vector<ir::Dim> dims = in.dims();
      dims[axis] = sizes[i];
      ctx.setOutputShape(i, ir::Shape(std::move(dims)));
    }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::Node &node = ctx.node();
    bool hasSplit = ctx.numInputs() > 1 && ctx.input(1);
    DTC_RETURN_IF_ERROR(checkSizesSpec(node, hasSplit));
    const ir::TensorData &data = *ctx.input(0);
    const std::vector<int64_t> &dims = data.dims();
    int64_t rank = static_cast<int64_t>(dims.size());
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(node.attrInt("axis", 0), rank, node.where()));
    std::optional<std::vector<int64_t>> split;
    if (hasSplit) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> s, ctx.input(1)->toInt64s());
      split = std::move(s);
    }
    int64_t n = static_cast<int64_t>(node.numOutputs());
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                         splitSizes(dims[axis], split, n, node.where()));
    int64_t inner = 1;
    for (int64_t k = axis + 1; k < rank; ++k)
      inner *= dims[k];
    std::vector<ir::TensorDataPtr> outs;
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> outDims = dims;
      outDims[axis] = sizes[i];
      int64_t len = sizes[i];
      auto src = [&](int64_t k) {
        int64_t o = k / (len * inner), rest = k % (len * inner);
        return (o * dims[axis] + offset) * inner + rest;
      };
      DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                           remapElements(node.output(i)->name(), data, outDims, src, node.where()));
      outs.push_back(t);
      offset += len;
    }
    return outs;
  };
  // dX = Concat of the outputs' gradients along the axis; an output that does not reach the
  // loss contributes zeros (ConstantOfShape, f32 0).
  d.gradient = [](GradientContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const int64_t rank = static_cast<int64_t>(ctx.input(0)->shape().rank());
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.attrInt("axis", 0), rank, n.where()));
    std::vector<ir::Value *> parts;
    for (size_t i = 0; i < n.numOutputs(); ++i) {
      ir::Value *g = ctx.outputGrad(i);
      if (!g) {
        DTC_ASSIGN_OR_RETURN(g, ctx.emit1("ConstantOfShape",
                                          {ctx.constantI64s(n.output(i)->shape().staticSizes())}));
      }
      parts.push_back(g);
    }
    ir::Value *dx = parts[0];
    if (parts.size() > 1) {
      DTC_ASSIGN_OR_RETURN(dx, ctx.emit1("Concat", parts, {{"axis", ir::Attribute(axis)}}));
    }
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = splitSharding;
  return d;
}

} // namespace dtc::ops
