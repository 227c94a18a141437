// Unsqueeze: inserts size-1 axes at `axes` (positions in the output; negative counts from the
// output's end). Forms: required `axes` attribute (1), negative axes (11), required int64 `axes`
// input (13, canonical).
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

namespace dtc::ops {
namespace {

Expected<std::vector<ir::Dim>> unsqueezeDims(const std::vector<ir::Dim> &in,
                                             const std::vector<int64_t> &axes,
                                             const std::string &where) {
  int64_t outRank = static_cast<int64_t>(in.size() + axes.size());
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalizeAxes(axes, outRank, where, "axes"));
  std::vector<bool> inserted(static_cast<size_t>(outRank), false);
  for (int64_t a : norm)
    inserted[a] = true;
  std::vector<ir::Dim> out;
  size_t next = 0;
  for (int64_t j = 0; j < outRank; ++j)
    out.push_back(inserted[j] ? ir::Dim::fixed(1) : in[next++]);
  return out;
}

} // namespace

OpDef defineUnsqueeze() {
  OpDef d;
  d.name = "Unsqueeze";
  d.version(1)
      .in("data", "T")
      .out("expanded", "T")
      .attr("axes", ir::AttrKind::kInts, true)
      .type("T", kAllTypes);
  d.version(11);
  OpVersion &v13 = d.version(13);
  v13.attrs.clear();
  v13.in("axes", "TAxes").type("TAxes", kInt64Type);
  d.normalize = normalizeAxesAttribute;
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    const ir::Shape &axesShape = ctx.inputShape(1);
    if (axesShape.hasRank() && axesShape.rank() != 1)
      return ctx.error("input 'axes' must be 1-D, got shape " + axesShape.str());
    std::optional<std::vector<int64_t>> axes = staticInts(ctx, 1);
    if (!in.hasRank())
      return Status::ok();
    if (!axes) {
      if (axesShape.hasRank() && axesShape[0].isStatic() &&
          axesShape[0].value() <= kMaxInferredRank)
        ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(in.rank() + axesShape[0].value(),
                                                             ir::Dim::unknown())));
      return Status::ok();
    }
    DTC_ASSIGN_OR_RETURN(std::vector<ir::Dim> dims,
                         unsqueezeDims(in.dims(), *axes, ctx.node().where()));
    if (dims.size() <= 1)
      if (const std::vector<ir::Dim> *value = ctx.shapeValue(0))
        ctx.setShapeValue(0, *value);
    ctx.setOutputShape(0, ir::Shape(std::move(dims)));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &data = *ctx.input(0);
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.input(1)->toInt64s());
    DTC_ASSIGN_OR_RETURN(
        std::vector<ir::Dim> dims,
        unsqueezeDims(ir::Shape::ofStatic(data.dims()).dims(), axes, ctx.node().where()));
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         withDims(ctx.node().output(0)->name(), data,
                                  ir::Shape(std::move(dims)).staticSizes(), ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = dY reshaped back to the input's shape.
  d.gradient = reshapeGradient;
  d.cost = viewCost();
  d.sharding = reshapeSharding(false);
  return d;
}

} // namespace dtc::ops
