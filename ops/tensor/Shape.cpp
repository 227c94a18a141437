// Shape: the 1-D int64 shape of its input. Forms: opset 1, and opset 15 with optional start/end
// attributes selecting a range of axes (negative = from the end, clamped). Data propagation
// records the (possibly symbolic) dims; folds when the selected dims are static.
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

#include <algorithm>

namespace dtc::ops {
namespace {

/// The [start, end) range of axes for rank `rank` (ONNX Shape-15 clamping).
std::pair<int64_t, int64_t> axisRange(const ir::Node &node, int64_t rank) {
  int64_t start = node.attrInt("start", 0);
  int64_t end = node.attrInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}

} // namespace

OpDef defineShape() {
  OpDef d;
  d.name = "Shape";
  d.version(1).in("data", "T").out("shape", "T1").type("T", kAllTypes).type("T1", kInt64Type);
  d.version(15).attr("start", ir::AttrKind::kInt).attr("end", ir::AttrKind::kInt);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    if (!in.hasRank()) {
      ctx.setOutputShape(0, ir::Shape({ir::Dim::unknown()}));
      return Status::ok();
    }
    auto [start, end] = axisRange(ctx.node(), static_cast<int64_t>(in.rank()));
    std::vector<ir::Dim> dims(in.dims().begin() + start, in.dims().begin() + end);
    ctx.setOutputShape(0, ir::Shape::ofStatic({end - start}));
    ctx.setShapeValue(0, std::move(dims));
    return Status::ok();
  };
  // Folds from the input's static shape (its contents are not needed: the input need not be a
  // constant), or from the constant's dims.
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::Node &node = ctx.node();
    std::vector<int64_t> sizes;
    if (node.input(0) && node.input(0)->shape().isStatic())
      sizes = node.input(0)->shape().staticSizes();
    else if (ctx.numInputs() > 0 && ctx.input(0))
      sizes = ctx.input(0)->dims();
    else
      return ctx.error("cannot fold Shape: the input shape is not static");
    auto [start, end] = axisRange(node, static_cast<int64_t>(sizes.size()));
    std::vector<int64_t> out(sizes.begin() + start, sizes.begin() + end);
    return std::vector<ir::TensorDataPtr>{ir::TensorData::fromInt64s(
        node.output(0)->name(), {static_cast<int64_t>(out.size())}, out)};
  };
  // Reads only X's metadata: writes the int64 shape.
  d.cost = writeOnlyCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
