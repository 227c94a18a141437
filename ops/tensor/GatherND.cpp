// GatherND: gathers slices of `data` (rank r >= 1) at the index tuples that form the last axis of
// `indices` (rank q >= 1, int64; m = indices.shape[-1] in [1, r - b]), after `batch_dims` = b
// leading axes that data and indices share (b < min(q, r)). Output shape:
// indices.shape[:-1] + data.shape[b + m:]. Negative indices count from the back. ONNX
// GatherND-11; GatherND-12 adds batch_dims; GatherND-13 adds bfloat16. Folds; out-of-range
// constant indices are errors naming the node.
#include "ops/ShapeHelpers.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Checks ranks, batch dims and the tuple length; returns the output shape.
Expected<ir::Shape> gatherNDShape(const ir::Shape &data, const ir::Shape &indices, int64_t b,
                                  const std::string &where) {
  const int64_t r = static_cast<int64_t>(data.rank()), q = static_cast<int64_t>(indices.rank());
  if (r < 1 || q < 1)
    return Status::error(where, "inputs 'data' " + data.str() + " and 'indices' " + indices.str() +
                                    " must have rank >= 1");
  if (b < 0 || b >= std::min(q, r))
    return Status::error(where, "batch_dims " + std::to_string(b) +
                                    " must be in [0, min(rank of data, rank of indices))");
  for (int64_t k = 0; k < b; ++k) {
    const ir::Dim &d = data[static_cast<size_t>(k)], &i = indices[static_cast<size_t>(k)];
    if (d.isStatic() && i.isStatic() && d.value() != i.value())
      return Status::error(where, "batch dim " + std::to_string(k) + " differs: 'data' " +
                                      data.str() + ", 'indices' " + indices.str());
  }
  std::vector<ir::Dim> out(indices.dims().begin(), indices.dims().end() - 1);
  const ir::Dim &last = indices[static_cast<size_t>(q - 1)];
  if (!last.isStatic())
    return ir::Shape::unknownRank();
  const int64_t m = last.value();
  if (m < 1 || m > r - b)
    return Status::error(where, "the last dim of 'indices' " + indices.str() + " is " +
                                    std::to_string(m) + "; it must be in [1, " +
                                    std::to_string(r - b) + "] for 'data' " + data.str() +
                                    " and batch_dims " + std::to_string(b));
  out.insert(out.end(), data.dims().begin() + b + m, data.dims().end());
  return ir::Shape(std::move(out));
}

} // namespace

OpDef defineGatherND() {
  OpDef d;
  d.name = "GatherND";
  d.version(11)
      .in("data", "T")
      .in("indices", "Tind")
      .out("output", "T")
      .type("T", kAllTypes & ~bit(ir::DType::kBFloat16))
      .type("Tind", kInt64Type);
  d.version(12).attr("batch_dims", ir::AttrKind::kInt);
  d.version(13).type("T", kAllTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &data = ctx.inputShape(0), &indices = ctx.inputShape(1);
    if (!data.hasRank() || !indices.hasRank())
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(
        ir::Shape out,
        gatherNDShape(data, indices, ctx.node().attrInt("batch_dims", 0), ctx.node().where()));
    ctx.setOutputShape(0, std::move(out));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    const ir::TensorData &data = *ctx.input(0), &indices = *ctx.input(1);
    const int64_t b = ctx.node().attrInt("batch_dims", 0);
    DTC_ASSIGN_OR_RETURN(ir::Shape outShape,
                         gatherNDShape(ir::Shape::ofStatic(data.dims()),
                                       ir::Shape::ofStatic(indices.dims()), b, where));
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, indices.toInt64s());
    const std::vector<int64_t> &dd = data.dims(), &id = indices.dims();
    const int64_t m = id.back();
    int64_t batches = 1, groups = 1, slice = 1, batchSize = 1;
    for (int64_t k = 0; k < b; ++k)
      batches *= dd[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(b); k + 1 < id.size(); ++k)
      groups *= id[k];
    for (size_t k = static_cast<size_t>(b + m); k < dd.size(); ++k)
      slice *= dd[k];
    for (size_t k = static_cast<size_t>(b); k < dd.size(); ++k)
      batchSize *= dd[k];
    // Data offset of each index tuple.
    std::vector<int64_t> base(static_cast<size_t>(batches * groups));
    for (int64_t t = 0; t < batches * groups; ++t) {
      int64_t off = (t / groups) * batchSize, stride = batchSize;
      for (int64_t k = 0; k < m; ++k) {
        const int64_t s = dd[static_cast<size_t>(b + k)];
        stride /= s;
        int64_t v = idx[static_cast<size_t>(t * m + k)];
        if (v < -s || v >= s)
          return ctx.error("index " + std::to_string(v) + " is out of range for axis " +
                           std::to_string(b + k) + " of size " + std::to_string(s));
        off += (v < 0 ? v + s : v) * stride;
      }
      base[static_cast<size_t>(t)] = off;
    }
    auto src = [&](int64_t k) { return base[static_cast<size_t>(k / slice)] + k % slice; };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t, remapElements(ctx.node().output(0)->name(), data,
                                                            outShape.staticSizes(), src, where));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = ai.dtc.GatherNDGrad(dY, indices): zeros of the data's shape with each dY slice added at
  // its index tuple (repeated tuples accumulate), as PyTorch's advanced-indexing backward
  // (index_put with accumulate=True).
  d.gradient = [](GradientContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("GatherNDGrad", {ctx.outputGrad(0), ctx.input(1)},
                                   {{"batch_dims", ir::Attribute(n.attrInt("batch_dims", 0))},
                                    {"shape", ir::Attribute(ctx.input(0)->shape().staticSizes())}},
                                   "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
