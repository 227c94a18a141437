// Tile (opset 6; 13 widens the types): repeats the input `repeats[i]` times along axis i;
// `repeats` is a 1-D int64 input with one entry per axis. Folds constants.
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineTile() {
  OpDef d;
  d.name = "Tile";
  d.version(6)
      .in("input", "T")
      .in("repeats", "T1")
      .out("output", "T")
      .type("T", kAllTypes)
      .type("T1", kInt64Type);
  d.version(13);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    const ir::Shape &repShape = ctx.inputShape(1);
    if (repShape.hasRank() && repShape.rank() != 1)
      return ctx.error("input 'repeats' must be 1-D, got shape " + repShape.str());
    if (!in.hasRank())
      return Status::ok();
    if (repShape.hasRank() && repShape[0].isStatic() &&
        repShape[0].value() != static_cast<int64_t>(in.rank()))
      return ctx.error("repeats has " + repShape[0].str() + " entries but the input " + in.str() +
                       " has rank " + std::to_string(in.rank()));
    const std::vector<ir::Dim> *repeats = ctx.shapeValue(1);
    std::vector<ir::Dim> dims(in.rank(), ir::Dim::unknown());
    if (repeats) {
      if (repeats->size() != in.rank())
        return ctx.error("repeats has " + std::to_string(repeats->size()) +
                         " entries but the input " + in.str() + " has rank " +
                         std::to_string(in.rank()));
      for (size_t i = 0; i < in.rank(); ++i) {
        const ir::Dim &r = (*repeats)[i];
        if (r.isStatic() && r.value() < 0)
          return ctx.error("repeats " + ir::Shape(*repeats).str() + " has a negative entry");
        dims[i] = in[i] * r;
      }
    }
    ctx.setOutputShape(0, ir::Shape(std::move(dims)));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &data = *ctx.input(0);
    const std::vector<int64_t> &inDims = data.dims();
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ctx.input(1)->toInt64s());
    if (repeats.size() != inDims.size())
      return ctx.error("repeats " + intsText(repeats) + " needs one entry per input axis (" +
                       std::to_string(inDims.size()) + ")");
    std::vector<int64_t> outDims;
    for (size_t i = 0; i < inDims.size(); ++i) {
      int64_t o;
      if (repeats[i] < 0 || __builtin_mul_overflow(inDims[i], repeats[i], &o))
        return ctx.error("repeats " + intsText(repeats) + " is invalid for this input");
      outDims.push_back(o);
    }
    std::vector<int64_t> inStrides = rowMajorStrides(inDims);
    size_t rank = inDims.size();
    auto src = [&](int64_t k) {
      int64_t s = 0;
      for (size_t a = rank; a-- > 0;) {
        s += (k % outDims[a]) % inDims[a] * inStrides[a];
        k /= outDims[a];
      }
      return s;
    };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t, remapElements(ctx.node().output(0)->name(), data,
                                                            outDims, src, ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX: dY (r0*d0, r1*d1, ...) reshaped to (r0, d0, r1, d1, ...) (only axes with r > 1 are
  // split), then ReduceSum over the repeat axes: every copy of an element adds its gradient.
  d.gradient = [](GradientContext &ctx) -> Status {
    const std::vector<int64_t> dims = ctx.input(0)->shape().staticSizes();
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, gradConstantInts(ctx, 1, "repeats"));
    if (repeats.size() != dims.size())
      return ctx.error("gradient: repeats " + intsText(repeats) + " do not match the rank " +
                       std::to_string(dims.size()));
    std::vector<int64_t> split, axes;
    for (size_t a = 0; a < dims.size(); ++a) {
      if (repeats[a] != 1) {
        axes.push_back(static_cast<int64_t>(split.size()));
        split.push_back(repeats[a]);
      }
      split.push_back(dims[a]);
    }
    ir::Value *dx = ctx.outputGrad(0);
    if (!axes.empty()) {
      DTC_ASSIGN_OR_RETURN(dx, ctx.reshapeTo(dx, split));
      DTC_ASSIGN_OR_RETURN(dx, ctx.emit1("ReduceSum", {dx, ctx.constantI64s(axes)},
                                         {{"keepdims", ir::Attribute(int64_t{0})},
                                          {"noop_with_empty_axes", ir::Attribute(int64_t{0})}}));
    }
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
