// Squeeze: removes size-1 axes. Forms: `axes` attribute (1), negative axes (11), `axes` as an
// optional int64 input (13, canonical). Without axes every static 1 is removed. Squeezing an
// axis whose size is not 1 is an error naming the node.
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

namespace dtc::ops {
namespace {

/// Output dims for `in` (rank known) and `axes` (nullopt = every static 1; unknown dims then
/// make the result rank unknown: nullopt).
Expected<std::optional<std::vector<ir::Dim>>>
squeezeDims(const std::vector<ir::Dim> &in, const std::optional<std::vector<int64_t>> &axes,
            const std::string &where) {
  std::vector<bool> drop(in.size(), false);
  if (axes) {
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> norm,
                         normalizeAxes(*axes, static_cast<int64_t>(in.size()), where, "axes"));
    for (int64_t a : norm) {
      if (in[a].isStatic() && in[a].value() != 1)
        return Status::error(where, "cannot squeeze axis " + std::to_string(a) + " of size " +
                                        in[a].str() + " (only size-1 axes can be squeezed)");
      drop[a] = true;
    }
  } else {
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].isUnknown())
        return std::optional<std::vector<ir::Dim>>();
      drop[i] = in[i].isStatic() && in[i].value() == 1;
    }
  }
  std::vector<ir::Dim> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i])
      out.push_back(in[i]);
  return std::optional<std::vector<ir::Dim>>(std::move(out));
}

} // namespace

OpDef defineSqueeze() {
  OpDef d;
  d.name = "Squeeze";
  d.version(1)
      .in("data", "T")
      .out("squeezed", "T")
      .attr("axes", ir::AttrKind::kInts)
      .type("T", kAllTypes);
  d.version(11);
  OpVersion &v13 = d.version(13);
  v13.attrs.clear();
  v13.optIn("axes", "TAxes").type("TAxes", kInt64Type);
  d.normalize = normalizeAxesAttribute;
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    std::optional<std::vector<int64_t>> axes;
    if (ctx.hasInput(1)) {
      const ir::Shape &axesShape = ctx.inputShape(1);
      if (axesShape.hasRank() && axesShape.rank() != 1)
        return ctx.error("input 'axes' must be 1-D, got shape " + axesShape.str());
      axes = staticInts(ctx, 1);
      if (!axes) {
        if (in.hasRank() && axesShape.hasRank() && axesShape[0].isStatic() &&
            axesShape[0].value() <= static_cast<int64_t>(in.rank()))
          ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(in.rank() - axesShape[0].value(),
                                                               ir::Dim::unknown())));
        return Status::ok();
      }
    }
    if (!in.hasRank())
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(std::optional<std::vector<ir::Dim>> dims,
                         squeezeDims(in.dims(), axes, ctx.node().where()));
    if (!dims)
      return Status::ok();
    if (dims->size() <= 1 && in.rank() <= 1)
      if (const std::vector<ir::Dim> *value = ctx.shapeValue(0))
        ctx.setShapeValue(0, *value);
    ctx.setOutputShape(0, ir::Shape(std::move(*dims)));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &data = *ctx.input(0);
    std::optional<std::vector<int64_t>> axes;
    if (ctx.numInputs() > 1 && ctx.input(1)) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> a, ctx.input(1)->toInt64s());
      axes = std::move(a);
    }
    DTC_ASSIGN_OR_RETURN(
        std::optional<std::vector<ir::Dim>> dims,
        squeezeDims(ir::Shape::ofStatic(data.dims()).dims(), axes, ctx.node().where()));
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         withDims(ctx.node().output(0)->name(), data,
                                  ir::Shape(std::move(*dims)).staticSizes(), ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = dY reshaped back to the input's shape.
  d.gradient = reshapeGradient;
  d.cost = viewCost();
  d.sharding = reshapeSharding(false);
  return d;
}

} // namespace dtc::ops
