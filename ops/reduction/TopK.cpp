// TopK (onnx/docs/Operators.md#TopK): the k largest (or smallest) elements of X along `axis` and
// their int64 indices. Forms: 1 (k attribute), 10 (K input, a 1-element int64 tensor), 11
// (largest, sorted; negative axis). Canonical form: 11, with K a constant made from opset 1's
// attribute. K must be known at compile time (plans are static). Order: values descending
// (ascending when largest=0), equal values by ascending index, as the spec requires; sorted=0
// allows any order, and dtc returns the sorted one. NaN counts as larger than every number.
// Gradient of Values: dValues scattered into zeros of X's shape at Indices along the axis
// (ai.dtc.GatherElementsGrad, as Values = GatherElements(X, Indices, axis)); Indices are not
// differentiable.
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"
#include "ops/Sharding.h"
#include "ops/reduction/TopKOrder.h"

#include <cmath>

namespace dtc::ops {

namespace {

Status normalizeTopK(ir::Node &node, NormalizeContext &ctx) {
  if (ctx.opset() >= 10)
    return Status::ok();
  if (!node.hasAttr("k"))
    return Status::error(node.where(),
                         "attribute 'k' is required in opset " + std::to_string(ctx.opset()));
  const int64_t k = node.attrInt("k", 0);
  node.removeAttr("k");
  node.addInput(ctx.int64Constant(node, "K", {k}));
  return Status::ok();
}

/// The value of K (input 1): one non-negative integer known at compile time.
Expected<int64_t> constantK(InferenceContext &ctx) {
  const std::vector<ir::Dim> *k = ctx.shapeValue(1);
  if (!k || k->size() != 1 || !(*k)[0].isStatic())
    return ctx.error("K must be a compile-time constant (one int64 value): a K computed at run "
                     "time is not supported (plans are static)");
  const int64_t v = (*k)[0].value();
  if (v < 0)
    return ctx.error("K must be >= 0, got " + std::to_string(v));
  return v;
}

Status inferTopK(InferenceContext &ctx) {
  const ir::Shape &x = ctx.inputShape(0);
  const ir::Shape &kShape = ctx.inputShape(1);
  if (kShape.hasRank() && (kShape.rank() != 1 || (kShape[0].isStatic() && kShape[0].value() != 1)))
    return ctx.error("K must be a 1-D tensor of one element, got " + kShape.str());
  DTC_ASSIGN_OR_RETURN(int64_t k, constantK(ctx));
  ctx.setOutputDType(1, ir::DType::kInt64);
  if (!x.hasRank()) {
    ctx.setOutputShape(0, x);
    ctx.setOutputShape(1, x);
    return Status::ok();
  }
  if (x.rank() == 0)
    return ctx.error("X must have rank >= 1");
  DTC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(ctx.node().attrInt("axis", -1), static_cast<int64_t>(x.rank()),
                                     ctx.node().where()));
  const ir::Dim &n = x[static_cast<size_t>(axis)];
  if (n.isStatic() && k > n.value())
    return ctx.error("K " + std::to_string(k) + " is larger than axis " + std::to_string(axis) +
                     " of X " + x.str());
  std::vector<ir::Dim> dims = x.dims();
  dims[static_cast<size_t>(axis)] = ir::Dim::fixed(k);
  ctx.setOutputShape(0, ir::Shape(dims));
  ctx.setOutputShape(1, ir::Shape(std::move(dims)));
  return Status::ok();
}

Expected<std::vector<ir::TensorDataPtr>> foldTopK(FoldContext &ctx) {
  const ir::TensorData &x = *ctx.input(0);
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ctx.input(1)->toInt64s());
  if (kv.size() != 1 || kv[0] < 0)
    return ctx.error("K must be one value >= 0");
  std::vector<int64_t> dims = x.dims();
  if (dims.empty())
    return ctx.error("X must have rank >= 1");
  DTC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(ctx.node().attrInt("axis", -1),
                                     static_cast<int64_t>(dims.size()), ctx.node().where()));
  const int64_t k = kv[0];
  if (k > dims[static_cast<size_t>(axis)])
    return ctx.error("K " + std::to_string(k) + " is larger than the axis");
  const bool largest = ctx.node().attrInt("largest", 1) != 0;
  std::vector<int64_t> outDims = dims;
  outDims[static_cast<size_t>(axis)] = k;
  int64_t count = 1;
  for (int64_t d : outDims)
    count *= d;
  std::vector<int64_t> indices(static_cast<size_t>(count));
  ir::TensorDataPtr values;
  const std::string name = ctx.node().output(0)->name();
  if (x.dtype() == ir::DType::kInt64) {
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> v, x.toInt64s());
    std::vector<int64_t> out(indices.size());
    topk::topK(v.data(), dims, axis, k, largest, out.data(), indices.data());
    values = ir::TensorData::fromInt64s(name, outDims, out);
  } else if (x.dtype() == ir::DType::kFloat32) {
    DTC_ASSIGN_OR_RETURN(std::vector<double> d, x.toDoubles());
    std::vector<float> v(d.begin(), d.end()), out(indices.size());
    topk::topK(v.data(), dims, axis, k, largest, out.data(), indices.data());
    values = ir::TensorData::fromFloats(name, outDims, out);
  } else {
    return ctx.error(std::string("folding supports f32 and i64, not ") + ir::dtypeName(x.dtype()));
  }
  return std::vector<ir::TensorDataPtr>{
      values, ir::TensorData::fromInt64s(ctx.node().output(1)->name(), outDims, indices)};
}

Status topKGrad(GradientContext &ctx) {
  if (ctx.outputGrad(1))
    return ctx.error("the loss depends on output Indices, which is not differentiable");
  ir::Value *dv = ctx.outputGrad(0);
  if (!dv || !ctx.needsGrad(0))
    return Status::ok();
  const std::vector<int64_t> dims = ctx.input(0)->shape().staticSizes();
  DTC_ASSIGN_OR_RETURN(int64_t axis,
                       normalizeAxis(ctx.node().attrInt("axis", -1),
                                     static_cast<int64_t>(dims.size()), ctx.node().where()));
  DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                       ctx.emit1("GatherElementsGrad", {dv, ctx.output(1)},
                                 {{"axis", ir::Attribute(axis)}, {"shape", ir::Attribute(dims)}},
                                 "ai.dtc"));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace

OpDef defineTopK() {
  OpDef d;
  d.name = "TopK";
  const TypeMask older = kFloatTypes & ~bit(ir::DType::kBFloat16);
  d.version(1)
      .in("X", "T")
      .out("Values", "T")
      .out("Indices", "I")
      .attr("axis", ir::AttrKind::kInt)
      .attr("k", ir::AttrKind::kInt, /*required=*/true)
      .type("T", older)
      .type("I", kInt64Type);
  OpVersion &v10 = d.version(10);
  v10.attrs = {{"axis", ir::AttrKind::kInt, false}};
  v10.inputs = {{"X", "T"}, {"K", "K"}};
  v10.type("K", kInt64Type);
  d.version(11)
      .attr("largest", ir::AttrKind::kInt)
      .attr("sorted", ir::AttrKind::kInt)
      .type("T", kNumericTypes & ~bit(ir::DType::kBFloat16));
  d.normalize = normalizeTopK;
  d.infer = inferTopK;
  d.fold = foldTopK;
  d.gradient = topKGrad;
  // A partial sort of each row of n elements along the axis: about n * log2(k + 1)
  // comparisons per row, counted as FLOPs.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    const std::vector<int64_t> &y = ctx.outputDims(0);
    const std::vector<int64_t> &x = ctx.inputDims(0);
    double rows = 1, n = 1, k = 1;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] == y[i])
        rows *= static_cast<double>(x[i]);
      else {
        n = static_cast<double>(x[i]);
        k = static_cast<double>(y[i]);
      }
    return ctx.withFlops(rows * n * std::log2(k + 1));
  };
  // Rows along other axes are independent; the axis itself is mixed.
  d.sharding = independentAxesSharding([](const ShardingContext &ctx) {
    const int64_t rank = static_cast<int64_t>(ctx.inputDims(0).size());
    int64_t a = ctx.node().attrInt("axis", -1);
    return std::vector<int64_t>{a < 0 ? a + rank : a};
  });
  return d;
}

} // namespace dtc::ops
