// Flatten: reshapes the input to 2-D [prod(dims[:axis]), prod(dims[axis:])] (opset 1 floats;
// 9 all types; 11 negative axis; 13 more types). Symbolic dims multiply as monomials.
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

#include "ops/ShapeHelpers.h"

namespace dtc::ops {
namespace {

/// Axis in [0, rank] (Flatten accepts axis == rank).
Expected<int64_t> flattenAxis(const ir::Node &node, int64_t rank) {
  int64_t axis = node.attrInt("axis", 1);
  if (axis < -rank || axis > rank)
    return Status::error(node.where(), "axis " + std::to_string(axis) +
                                           " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

} // namespace

OpDef defineFlatten() {
  OpDef d;
  d.name = "Flatten";
  d.version(1)
      .in("input", "T")
      .out("output", "T")
      .attr("axis", ir::AttrKind::kInt)
      .type("T", kFloatTypes);
  d.version(9).type("T", kAllTypes);
  d.version(11);
  d.version(13);
  d.normalize = [](ir::Node &node, NormalizeContext &ctx) -> Status {
    return rejectNegativeAttrBefore11(node, ctx.opset(), "axis");
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    if (!in.hasRank()) {
      ctx.setOutputShape(0, ir::Shape({ir::Dim::unknown(), ir::Dim::unknown()}));
      return Status::ok();
    }
    DTC_ASSIGN_OR_RETURN(int64_t axis, flattenAxis(ctx.node(), static_cast<int64_t>(in.rank())));
    ir::Dim outer = ir::Dim::fixed(1), inner = ir::Dim::fixed(1);
    for (size_t i = 0; i < in.rank(); ++i)
      (static_cast<int64_t>(i) < axis ? outer : inner) =
          (static_cast<int64_t>(i) < axis ? outer : inner) * in[i];
    ctx.setOutputShape(0, ir::Shape({outer, inner}));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &data = *ctx.input(0);
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         flattenAxis(ctx.node(), static_cast<int64_t>(data.dims().size())));
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < data.dims().size(); ++i)
      (static_cast<int64_t>(i) < axis ? outer : inner) *= data.dims()[i];
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t, withDims(ctx.node().output(0)->name(), data,
                                                       {outer, inner}, ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = dY reshaped back to the input's shape.
  d.gradient = reshapeGradient;
  d.cost = viewCost();
  d.sharding = reshapeSharding(false);
  return d;
}

} // namespace dtc::ops
