// ScatterND: a copy of `data` (rank r >= 1) in which the slice at each index tuple of `indices`
// (rank q >= 1, int64; tuples of length m = indices.shape[-1] <= r, negative entries count from
// the back) receives the matching slice of `updates` (shape indices.shape[:-1] +
// data.shape[m:]), combined by `reduction`: "none" (overwrite, repeated tuples applied in order),
// "add", "mul" (opset 16), "min", "max" (opset 18). ONNX ScatterND-11/13/16/18. Folds.
// Gradient (none or add): d updates = GatherND(dY, indices); d data = dY with the scattered
// slices zeroed (none) or dY (add).
#include "ops/ShapeHelpers.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineScatterND() {
  OpDef d;
  d.name = "ScatterND";
  d.version(11)
      .in("data", "T")
      .in("indices", "Tind")
      .in("updates", "T")
      .out("output", "T")
      .type("T", kAllTypes & ~bit(ir::DType::kBFloat16))
      .type("Tind", kInt64Type);
  d.version(13).type("T", kAllTypes);
  d.version(16).attr("reduction", ir::AttrKind::kString);
  d.version(18);
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string r = ctx.node().attrString("reduction", "none");
    if (r != "none" && r != "add" && r != "mul" && r != "min" && r != "max")
      return ctx.error("attribute 'reduction' must be none, add, mul, min or max, got '" + r + "'");
    const ir::Shape &data = ctx.inputShape(0), &idx = ctx.inputShape(1), &upd = ctx.inputShape(2);
    if (data.isStatic() && idx.isStatic()) {
      const std::vector<int64_t> dd = data.staticSizes(), id = idx.staticSizes();
      if (dd.empty() || id.empty() || id.back() < 1 || id.back() > static_cast<int64_t>(dd.size()))
        return ctx.error("'indices' " + idx.str() + " does not index 'data' " + data.str() +
                         " (its last dim must be in [1, rank of data])");
      std::vector<int64_t> want(id.begin(), id.end() - 1);
      want.insert(want.end(), dd.begin() + id.back(), dd.end());
      if (upd.isStatic() && upd.staticSizes() != want)
        return ctx.error("input 'updates' " + upd.str() + " must have shape " + intsText(want));
    }
    ctx.setOutputShape(0, data);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::vector<int64_t> &dd = ctx.input(0)->dims(), &id = ctx.input(1)->dims();
    if (dd.empty() || id.empty() || id.back() < 1 || id.back() > static_cast<int64_t>(dd.size()))
      return ctx.error("'indices' do not index 'data'");
    const int64_t m = id.back();
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ctx.input(1)->toInt64s());
    int64_t slice = 1;
    for (size_t k = static_cast<size_t>(m); k < dd.size(); ++k)
      slice *= dd[k];
    const std::vector<int64_t> strides = rowMajorStrides(dd);
    std::vector<int64_t> dest(idx.size() / static_cast<size_t>(m));
    for (size_t t = 0; t < dest.size(); ++t) {
      int64_t off = 0;
      for (int64_t k = 0; k < m; ++k) {
        const int64_t s = dd[static_cast<size_t>(k)];
        int64_t v = idx[t * static_cast<size_t>(m) + static_cast<size_t>(k)];
        if (v < -s || v >= s)
          return ctx.error("index " + std::to_string(v) + " is out of range for axis " +
                           std::to_string(k) + " of size " + std::to_string(s));
        off += (v < 0 ? v + s : v) * strides[static_cast<size_t>(k)];
      }
      dest[t] = off;
    }
    if (ctx.input(2)->numElements() != static_cast<int64_t>(dest.size()) * slice)
      return ctx.error("input 'updates' has the wrong number of elements");
    return foldScatter(ctx, dest, slice);
  };
  d.gradient = [](GradientContext &ctx) { return scatterGradient(ctx, "GatherND"); };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
