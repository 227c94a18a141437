// Reshape: data reshaped to the dims of a 1-D int64 `shape` input (opset 5; allowzero from 14).
// 0 copies the input dim (a real 0 under allowzero=1), one -1 is inferred from the element count,
// exact on symbolic batches ([N,3,4] -> [-1,12] is [N,12]). The shape may come from a constant
// or from data propagation (Shape -> Gather -> Unsqueeze -> Concat chains).
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineReshape() {
  OpDef d;
  d.name = "Reshape";
  d.version(5)
      .in("data", "T")
      .in("shape", "TShape")
      .out("reshaped", "T")
      .type("T", kAllTypes)
      .type("TShape", kInt64Type);
  d.version(14).attr("allowzero", ir::AttrKind::kInt);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    const ir::Shape &shapeShape = ctx.inputShape(1);
    bool allowZero = ctx.node().attrInt("allowzero", 0) != 0;
    if (shapeShape.hasRank() && shapeShape.rank() != 1)
      return ctx.error("input 'shape' must be 1-D, got shape " + shapeShape.str());
    if (const std::vector<ir::Dim> *target = ctx.shapeValue(1)) {
      DTC_ASSIGN_OR_RETURN(std::vector<ir::Dim> dims,
                           reshapeDims(in, *target, allowZero, ctx.node().where()));
      ir::Shape out(std::move(dims));
      // Data propagation: a shape value reshaped to a scalar or 1-D keeps its elements.
      if (const std::vector<ir::Dim> *value = ctx.shapeValue(0)) {
        ir::Dim count = out.product();
        if (out.rank() <= 1 && count.isStatic() &&
            count.value() == static_cast<int64_t>(value->size()))
          ctx.setShapeValue(0, *value);
      }
      ctx.setOutputShape(0, std::move(out));
    } else if (shapeShape.hasRank() && shapeShape[0].isStatic() &&
               shapeShape[0].value() <= kMaxInferredRank) {
      ctx.setOutputShape(
          0, ir::Shape(std::vector<ir::Dim>(shapeShape[0].value(), ir::Dim::unknown())));
    }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    const ir::TensorData &data = *ctx.input(0);
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> target, ctx.input(1)->toInt64s());
    std::vector<ir::Dim> targetDims;
    for (int64_t x : target)
      targetDims.push_back(ir::Dim::fixed(x));
    DTC_ASSIGN_OR_RETURN(std::vector<ir::Dim> dims,
                         reshapeDims(ir::Shape::ofStatic(data.dims()), targetDims,
                                     ctx.node().attrInt("allowzero", 0) != 0, where));
    ir::Shape out(std::move(dims));
    if (!out.isStatic())
      return ctx.error("cannot fold Reshape: the result shape is not static");
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         withDims(ctx.node().output(0)->name(), data, out.staticSizes(), where));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = dY reshaped back to the input's shape.
  d.gradient = reshapeGradient;
  d.cost = viewCost();
  d.sharding = reshapeSharding(true);
  return d;
}

} // namespace dtc::ops
