// Gather: picks entries of `data` along `axis` at `indices` (int32/int64); output rank is
// r + q - 1. Forms: opset 1, negative indices from 11, more types from 13. Propagates shape
// values (Shape(x) -> Gather(0)) and folds constants; out-of-range constant indices are errors.
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

#include "ops/ShapeHelpers.h"

namespace dtc::ops {

namespace {

/// Embedding rows (vocabulary) split: a 2-D weight gathered along axis 0 is split by rows when it
/// is large (>= 8192 rows, as Megatron's VocabParallelEmbedding targets) or tied to another use
/// (an output projection that then runs column-parallel); each rank looks up its rows and the
/// output is a partial sum. Otherwise a split of data along another axis, or of the indices,
/// passes through.
Status gatherSharding(ShardingContext &ctx) {
  const std::vector<int64_t> &data = ctx.inputDims(0);
  const int64_t rank = static_cast<int64_t>(data.size());
  int64_t axis = ctx.node().attrInt("axis", 0);
  if (axis < 0)
    axis += rank;
  const int64_t ri = static_cast<int64_t>(ctx.inputDims(1).size());
  const ir::Sharding &sd = ctx.input(0), &si = ctx.input(1);
  const int64_t T = ctx.parts();
  // A vocabulary that does not divide by T is split unevenly (ir::splitRange's row ranges).
  const bool embedding = axis == 0 && rank == 2 && data[0] >= T && si.isReplicated();
  if (embedding && ctx.isFreeWeight(0)) {
    const ir::Value *w = ctx.node().input(0);
    if (data[0] >= 8192 || w->uses().size() > 1) {
      ctx.require(0, ir::Sharding::split(0, T));
      ctx.setMaskedGather();
      ctx.setOutput(0, ir::Sharding::partial(T));
    }
    return Status::ok();
  }
  if (embedding && sd.isSplit() && sd.axis == 0 && sd.blocks == 1) {
    ctx.require(0, sd);
    ctx.setMaskedGather();
    ctx.setOutput(0, ir::Sharding::partial(T));
    return Status::ok();
  }
  if (sd.isSplit() && sd.axis != axis && si.isReplicated()) {
    ctx.require(0, sd);
    ctx.setOutput(0,
                  ir::Sharding::split(sd.axis < axis ? sd.axis : sd.axis + ri - 1, T, sd.blocks));
    return Status::ok();
  }
  if (si.isSplit() && sd.isReplicated() && !ctx.isFreeWeight(0)) {
    ctx.require(1, si);
    ctx.setOutput(0, ir::Sharding::split(axis + si.axis, T, si.blocks));
  }
  return Status::ok();
}

} // namespace

OpDef defineGather() {
  OpDef d;
  d.name = "Gather";
  d.version(1)
      .in("data", "T")
      .in("indices", "Tind")
      .out("output", "T")
      .attr("axis", ir::AttrKind::kInt)
      .type("T", kAllTypes)
      .type("Tind", kInt32Or64Types);
  d.version(11);
  d.version(13);
  d.normalize = [](ir::Node &node, NormalizeContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(rejectNegativeAttrBefore11(node, ctx.opset(), "axis"));
    const ir::Value *indices = node.input(1);
    if (ctx.opset() < 11 && indices && indices->isInitializer() && !indices->isGraphInput()) {
      if (auto ints = indices->initializer()->toInt64s())
        for (int64_t x : *ints)
          if (x < 0)
            return Status::error(node.where(), "negative index " + std::to_string(x) +
                                                   " is not allowed before opset 11 (model "
                                                   "opset " +
                                                   std::to_string(ctx.opset()) + ")");
    }
    return Status::ok();
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &data = ctx.inputShape(0);
    const ir::Shape &indices = ctx.inputShape(1);
    if (!data.hasRank() || !indices.hasRank())
      return Status::ok();
    int64_t rank = static_cast<int64_t>(data.rank());
    if (rank == 0)
      return ctx.error("input 'data' must have rank >= 1");
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeAxis(ctx.node().attrInt("axis", 0), rank, ctx.node().where()));
    const ir::Dim &axisDim = data[axis];
    const std::vector<ir::Dim> *idx = indices.rank() <= 1 ? ctx.shapeValue(1) : nullptr;
    std::vector<int64_t> normIdx;
    if (idx) {
      for (const ir::Dim &i : *idx) {
        if (!i.isStatic()) {
          normIdx.clear();
          idx = nullptr;
          break;
        }
        int64_t v = i.value();
        if (axisDim.isStatic()) {
          if (v < -axisDim.value() || v >= axisDim.value())
            return ctx.error("index " + std::to_string(v) + " is out of range for axis " +
                             std::to_string(axis) + " of size " + axisDim.str());
          if (v < 0)
            v += axisDim.value();
        } else if (v < 0) {
          idx = nullptr; // relative to a symbolic size: not known
        }
        normIdx.push_back(v);
      }
    }
    std::vector<ir::Dim> out(data.dims().begin(), data.dims().begin() + axis);
    out.insert(out.end(), indices.dims().begin(), indices.dims().end());
    out.insert(out.end(), data.dims().begin() + axis + 1, data.dims().end());
    ctx.setOutputShape(0, ir::Shape(std::move(out)));
    // Data propagation: entries of a 1-D shape value.
    if (idx && rank == 1)
      if (const std::vector<ir::Dim> *value = ctx.shapeValue(0)) {
        std::vector<ir::Dim> picked;
        for (int64_t v : normIdx) {
          if (v >= static_cast<int64_t>(value->size()))
            return Status::ok();
          picked.push_back((*value)[v]);
        }
        ctx.setShapeValue(0, std::move(picked));
      }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    const ir::TensorData &data = *ctx.input(0);
    const ir::TensorData &indices = *ctx.input(1);
    const std::vector<int64_t> &dims = data.dims();
    int64_t rank = static_cast<int64_t>(dims.size());
    if (rank == 0)
      return ctx.error("input 'data' must have rank >= 1");
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(ctx.node().attrInt("axis", 0), rank, where));
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, indices.toInt64s());
    for (int64_t &v : idx) {
      if (v < -dims[axis] || v >= dims[axis])
        return ctx.error("index " + std::to_string(v) + " is out of range for axis " +
                         std::to_string(axis) + " of size " + std::to_string(dims[axis]));
      if (v < 0)
        v += dims[axis];
    }
    std::vector<int64_t> outDims(dims.begin(), dims.begin() + axis);
    outDims.insert(outDims.end(), indices.dims().begin(), indices.dims().end());
    outDims.insert(outDims.end(), dims.begin() + axis + 1, dims.end());
    int64_t inner = 1;
    for (int64_t k = axis + 1; k < rank; ++k)
      inner *= dims[k];
    int64_t q = static_cast<int64_t>(idx.size());
    auto src = [&](int64_t k) {
      int64_t rest = k % inner, j = (k / inner) % q, o = k / inner / q;
      return (o * dims[axis] + idx[j]) * inner + rest;
    };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         remapElements(ctx.node().output(0)->name(), data, outDims, src, where));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = ai.dtc.GatherGrad(dY, indices): zeros of the data's shape with dY's slices
  // scatter-added at the indices (repeated indices accumulate; negative ones count from the
  // back), as PyTorch's index_select / embedding backward (ops/training/TensorGradGather.cpp).
  d.gradient = [](GradientContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const std::vector<int64_t> dims = ctx.input(0)->shape().staticSizes();
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.attrInt("axis", 0),
                                                     static_cast<int64_t>(dims.size()), n.where()));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("GatherGrad", {ctx.outputGrad(0), ctx.input(1)},
                                   {{"axis", ir::Attribute(axis)}, {"shape", ir::Attribute(dims)}},
                                   "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = gatherSharding;
  return d;
}

} // namespace dtc::ops
