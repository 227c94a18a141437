// Expand (opset 8; 13 widens the types): broadcasts the input to a shape given by a 1-D int64
// input, bidirectionally (numpy rules: the result may be larger than the requested shape).
// The shape may be a constant or a data-propagated shape value; folds constants.
#include "ops/tensor/TensorCommon.h"

#include "ops/ShapeHelpers.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineExpand() {
  OpDef d;
  d.name = "Expand";
  d.version(8)
      .in("input", "T")
      .in("shape", "TShape")
      .out("output", "T")
      .type("T", kAllTypes)
      .type("TShape", kInt64Type);
  d.version(13);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    const ir::Shape &shapeShape = ctx.inputShape(1);
    if (shapeShape.hasRank() && shapeShape.rank() != 1)
      return ctx.error("input 'shape' must be 1-D, got shape " + shapeShape.str());
    if (const std::vector<ir::Dim> *target = ctx.shapeValue(1)) {
      for (const ir::Dim &t : *target)
        if (t.isStatic() && t.value() < 0)
          return ctx.error("shape " + ir::Shape(*target).str() + " has a negative dimension");
      DTC_ASSIGN_OR_RETURN(ir::Shape out,
                           broadcastShapes({in, ir::Shape(*target)}, ctx.node().where()));
      ctx.setOutputShape(0, std::move(out));
    } else if (in.hasRank() && shapeShape.hasRank() && shapeShape[0].isStatic() &&
               shapeShape[0].value() <= kMaxInferredRank) {
      size_t rank = std::max<size_t>(in.rank(), static_cast<size_t>(shapeShape[0].value()));
      ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(rank, ir::Dim::unknown())));
    }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    const ir::TensorData &data = *ctx.input(0);
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> target, ctx.input(1)->toInt64s());
    for (int64_t t : target)
      if (t < 0)
        return ctx.error("shape " + intsText(target) + " has a negative dimension");
    DTC_ASSIGN_OR_RETURN(
        ir::Shape outShape,
        broadcastShapes({ir::Shape::ofStatic(data.dims()), ir::Shape::ofStatic(target)}, where));
    std::vector<int64_t> outDims = outShape.staticSizes();
    size_t rank = outDims.size(), offset = rank - data.dims().size();
    std::vector<int64_t> inStrides = rowMajorStrides(data.dims());
    auto src = [&](int64_t k) {
      int64_t s = 0;
      for (size_t a = rank; a-- > offset;) {
        int64_t c = k % outDims[a];
        k /= outDims[a];
        if (data.dims()[a - offset] != 1)
          s += c * inStrides[a - offset];
      }
      return s;
    };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         remapElements(ctx.node().output(0)->name(), data, outDims, src, where));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = dY summed over the axes the input was broadcast along (sumToShape).
  d.gradient = [](GradientContext &ctx) -> Status {
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.sumToShape(ctx.outputGrad(0), ctx.input(0)->shape()));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
