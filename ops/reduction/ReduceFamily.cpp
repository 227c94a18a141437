// The definitions shared by the reductions beyond ReduceSum: their opset forms (reduceDef,
// reduceMinMaxDef), constant folding through doubles (foldReduce) and the two shapes of gradient
// rule they use (the selected elements of ReduceMax/ReduceMin; dX = dY * g(X, Y) elementwise).
#include "ops/reduction/Reduce.h"

#include "ops/Sharding.h"
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef reduceDef(const std::string &name) {
  OpDef d;
  d.name = name;
  reduceAttrForm(d, 1, kReduceTypes);
  reduceAttrForm(d, 11, kReduceTypes);
  reduceAttrForm(d, 13, kReduceTypes | bit(ir::DType::kBFloat16));
  reduceInputForm(d, 18);
  d.normalize = reduceNormalizer(18);
  d.infer = inferReduce;
  d.sharding = reduceSharding();
  return d;
}

OpDef reduceMinMaxDef(const std::string &name) {
  OpDef d;
  d.name = name;
  const TypeMask t12 = kReduceTypes | bit(ir::DType::kInt8) | bit(ir::DType::kUInt8);
  reduceAttrForm(d, 1, kReduceTypes);
  reduceAttrForm(d, 11, kReduceTypes);
  reduceAttrForm(d, 12, t12);
  reduceAttrForm(d, 13, t12 | bit(ir::DType::kBFloat16));
  reduceInputForm(d, 18);
  d.version(20).type("T", t12 | bit(ir::DType::kBFloat16) | kBoolType);
  d.normalize = reduceNormalizer(18);
  d.infer = inferReduce;
  d.sharding = reduceSharding();
  return d;
}

namespace {

/// X's shape with the reduced `axes` set to 1 (the keepdims shape).
std::vector<int64_t> keptShape(GradientContext &ctx, const std::vector<int64_t> &axes) {
  std::vector<int64_t> kept = ctx.input(0)->shape().staticSizes();
  for (int64_t a : axes)
    kept[static_cast<size_t>(a)] = 1;
  return kept;
}

} // namespace

Status
reduceLocalGradient(GradientContext &ctx,
                    const std::function<Expected<ir::Value *>(ir::Value *x, ir::Value *y)> &local,
                    bool noopIsIdentity) {
  if (!ctx.needsGrad(0))
    return Status::ok();
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reducedAxes(ctx));
  if (axes.empty() && noopIsIdentity) { // noop_with_empty_axes: Y = X
    ctx.setInputGrad(0, ctx.outputGrad(0));
    return Status::ok();
  }
  const std::vector<int64_t> kept = keptShape(ctx, axes);
  DTC_ASSIGN_OR_RETURN(ir::Value * y, ctx.reshapeTo(ctx.output(0), kept));
  DTC_ASSIGN_OR_RETURN(ir::Value * dy, ctx.reshapeTo(ctx.outputGrad(0), kept));
  DTC_ASSIGN_OR_RETURN(ir::Value * g, local(ctx.input(0), y));
  DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("Mul", {g, dy}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status selectedElementsGradient(GradientContext &ctx) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reducedAxes(ctx));
  return reduceLocalGradient(ctx, [&](ir::Value *x, ir::Value *y) -> Expected<ir::Value *> {
    DTC_ASSIGN_OR_RETURN(ir::Value * eq, ctx.emit1("Equal", {x, y}));
    DTC_ASSIGN_OR_RETURN(
        ir::Value * mask,
        ctx.emit1("Cast", {eq}, {{"to", ir::Attribute(static_cast<int64_t>(1))}})); // FLOAT
    DTC_ASSIGN_OR_RETURN(ir::Value * count,
                         ctx.emit1("ReduceSum", {mask, ctx.constantI64s(axes)},
                                   {{"keepdims", ir::Attribute(int64_t{1})},
                                    {"noop_with_empty_axes", ir::Attribute(int64_t{0})}}));
    return ctx.emit1("Div", {mask, count});
  });
}

Expected<std::vector<ir::TensorDataPtr>> foldReduce(FoldContext &ctx, const ReduceFold &f) {
  const ir::TensorData &x = *ctx.input(0);
  const std::vector<int64_t> &dims = x.dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<bool> reduced(dims.size(), false);
  std::vector<int64_t> axes;
  if (ctx.numInputs() > 1 && ctx.input(1)) {
    DTC_ASSIGN_OR_RETURN(axes, ctx.input(1)->toInt64s());
  }
  const bool noop = axes.empty() && ctx.node().attrInt("noop_with_empty_axes", 0) != 0;
  if (axes.empty() && !noop)
    reduced.assign(dims.size(), true);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return ctx.error("axes value " + std::to_string(a) + " is out of range for rank " +
                       std::to_string(rank));
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  const bool keepdims = ctx.node().attrInt("keepdims", 1) != 0;
  std::vector<int64_t> outDims, kept;
  for (size_t d = 0; d < dims.size(); ++d) {
    kept.push_back(reduced[d] ? 1 : dims[d]);
    if (!reduced[d] || keepdims)
      outDims.push_back(kept.back());
  }
  DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(x));
  int64_t outCount = 1;
  for (int64_t k : kept)
    outCount *= k;
  std::vector<double> acc(static_cast<size_t>(outCount), f.init);
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      o = o * kept[d] + (reduced[d] ? 0 : idx[d]);
    acc[static_cast<size_t>(o)] = f.step(acc[static_cast<size_t>(o)], v[i]);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d])
        break;
      idx[d] = 0;
    }
  }
  const int64_t count = outCount ? static_cast<int64_t>(v.size()) / outCount : 0;
  // Without reduced axes (noop_with_empty_axes) every element is a slice of one: L1 gives |x|,
  // SumSquare x^2, as the ONNX reference computes.
  for (double &a : acc)
    a = f.finish(a, count);
  return std::vector<ir::TensorDataPtr>{
      makeTensor(ctx.node().output(0)->name(), x.dtype(), outDims, acc)};
}

} // namespace dtc::ops
