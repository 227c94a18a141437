// Concat: joins its inputs along `axis` (required from opset 4; negative from 11; 13 widens the
// types). All inputs have the same rank and agree off the axis. Propagates 1-D shape values
// (the Shape -> ... -> Concat -> Reshape chains of PyTorch exports) and folds constants.
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

#include "ops/ShapeHelpers.h"

namespace dtc::ops {

namespace {

/// Inputs split alike on an axis other than the concatenation axis give an output split on it.
Status concatSharding(ShardingContext &ctx) {
  const int64_t rank = static_cast<int64_t>(ctx.outputDims(0).size());
  int64_t axis = ctx.node().attrInt("axis", 0);
  if (axis < 0)
    axis += rank;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const ir::Sharding &s = ctx.input(i);
    if (!s.isSplit())
      continue;
    if (s.axis == axis)
      return Status::ok();
    for (size_t k = 0; k < ctx.numInputs(); ++k)
      ctx.require(k, s);
    ctx.setOutput(0, s);
    return Status::ok();
  }
  return Status::ok();
}

} // namespace

OpDef defineConcat() {
  OpDef d;
  d.name = "Concat";
  d.version(4)
      .variadicIn("inputs", "T")
      .out("concat_result", "T")
      .attr("axis", ir::AttrKind::kInt, true)
      .type("T", kAllTypes);
  d.version(11);
  d.version(13);
  d.normalize = [](ir::Node &node, NormalizeContext &ctx) -> Status {
    return rejectNegativeAttrBefore11(node, ctx.opset(), "axis");
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string where = ctx.node().where();
    int64_t rank = -1;
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      if (!ctx.hasInput(i))
        return ctx.error("input " + std::to_string(i) + " is missing");
      const ir::Shape &s = ctx.inputShape(i);
      if (!s.hasRank())
        continue;
      if (rank >= 0 && static_cast<int64_t>(s.rank()) != rank)
        return ctx.error("all inputs must have the same rank; input " + std::to_string(i) +
                         " has shape " + s.str() + ", an earlier input has rank " +
                         std::to_string(rank));
      rank = static_cast<int64_t>(s.rank());
    }
    if (rank < 0)
      return Status::ok();
    if (rank == 0)
      return ctx.error("cannot concatenate scalars (inputs must have rank >= 1)");
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx.node().attrInt("axis", 0), rank, where));
    std::vector<ir::Dim> out(static_cast<size_t>(rank), ir::Dim::unknown());
    std::optional<ir::Dim> sum; // fixed(0) + N would lose the monomial: start from the first
    bool allRanked = true;
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      const ir::Shape &s = ctx.inputShape(i);
      if (!s.hasRank()) {
        allRanked = false;
        continue;
      }
      for (int64_t k = 0; k < rank; ++k) {
        const ir::Dim &dk = s[k];
        if (k == axis)
          continue;
        ir::Dim &o = out[k];
        if (o.isUnknown() || (!o.isStatic() && dk.isStatic()))
          o = dk;
        else if (o.isStatic() && dk.isStatic() && o.value() != dk.value())
          return ctx.error("input " + std::to_string(i) + " has shape " + s.str() +
                           ", which differs from the other inputs in dimension " +
                           std::to_string(k) + " (" + o.str() + ")");
      }
      sum = sum ? *sum + s[axis] : s[axis];
    }
    out[axis] = allRanked && sum ? *sum : ir::Dim::unknown();
    ctx.setOutputShape(0, ir::Shape(std::move(out)));
    // Data propagation of 1-D shape values.
    if (rank == 1) {
      std::vector<ir::Dim> value;
      for (size_t i = 0; i < ctx.numInputs(); ++i) {
        const std::vector<ir::Dim> *v = ctx.shapeValue(i);
        if (!v)
          return Status::ok();
        value.insert(value.end(), v->begin(), v->end());
      }
      ctx.setShapeValue(0, std::move(value));
    }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    if (ctx.numInputs() == 0)
      return ctx.error("Concat needs at least one input");
    const ir::TensorData &first = *ctx.input(0);
    int64_t rank = static_cast<int64_t>(first.dims().size());
    if (rank == 0)
      return ctx.error("cannot concatenate scalars");
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx.node().attrInt("axis", 0), rank, where));
    int64_t size = ir::dtypeSize(first.dtype());
    if (size == 0)
      return ctx.error(std::string("cannot fold tensors of type ") + ir::dtypeName(first.dtype()));
    std::vector<int64_t> outDims = first.dims();
    outDims[axis] = 0;
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      const ir::TensorData &t = *ctx.input(i);
      if (t.dtype() != first.dtype() || static_cast<int64_t>(t.dims().size()) != rank)
        return ctx.error("inputs differ in type or rank");
      for (int64_t k = 0; k < rank; ++k)
        if (k != axis && t.dims()[k] != first.dims()[k])
          return ctx.error("inputs differ in dimension " + std::to_string(k));
      outDims[axis] += t.dims()[axis];
    }
    std::optional<int64_t> count = ir::checkedProduct(outDims);
    if (!count || *count > kMaxFoldElements)
      return ctx.error("result is too large to fold");
    // Row-major: copy blocks of dims[axis:] per outer index from each input in turn.
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k)
      outer *= outDims[k];
    std::string bytes;
    bytes.reserve(static_cast<size_t>(*count * size));
    std::vector<const std::string *> raw;
    std::vector<int64_t> block;
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      DTC_ASSIGN_OR_RETURN(const std::string *b, ctx.input(i)->bytes());
      raw.push_back(b);
      block.push_back(outer == 0 ? 0 : ctx.input(i)->numElements() / outer * size);
    }
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < raw.size(); ++i)
        bytes.append(raw[i]->data() + o * block[i], static_cast<size_t>(block[i]));
    return std::vector<ir::TensorDataPtr>{ir::TensorData::fromBytes(
        ctx.node().output(0)->name(), first.dtype(), outDims, std::move(bytes))};
  };
  // dY cut back into the inputs' pieces along the axis: Split(dY, sizes).
  d.gradient = [](GradientContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const int64_t rank = static_cast<int64_t>(ctx.input(0)->shape().rank());
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.attrInt("axis", 0), rank, n.where()));
    if (n.numInputs() == 1) {
      ctx.setInputGrad(0, ctx.outputGrad(0));
      return Status::ok();
    }
    std::vector<int64_t> sizes;
    for (const ir::Value *in : n.inputs())
      sizes.push_back(in->shape().staticSizes()[static_cast<size_t>(axis)]);
    DTC_ASSIGN_OR_RETURN(std::vector<ir::Value *> pieces,
                         ctx.emit("Split", {ctx.outputGrad(0), ctx.constantI64s(sizes)},
                                  sizes.size(), {{"axis", ir::Attribute(axis)}}));
    for (size_t i = 0; i < pieces.size(); ++i)
      if (ctx.needsGrad(i))
        ctx.setInputGrad(i, pieces[i]);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = concatSharding;
  return d;
}

} // namespace dtc::ops
