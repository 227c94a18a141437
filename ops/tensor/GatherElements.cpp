// GatherElements: out[i_0, .., i_{r-1}] = data[i_0, .., indices[i_0, .., i_{r-1}], .., i_{r-1}]
// with the index in position `axis` (default 0, in [-r, r)); data and indices have one rank
// r >= 1, the output has indices' shape (torch.gather). Negative indices count from the back;
// on the other axes indices' dims must not exceed data's (onnxruntime's rule). ONNX
// GatherElements-11; GatherElements-13 adds bfloat16. Folds; out-of-range constant indices are
// errors naming the node.
#include "ops/ShapeHelpers.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

/// Checks ranks and the non-axis dims of static shapes; returns the normalized axis.
Expected<int64_t> checkGatherElementsShapes(const ir::Shape &data, const ir::Shape &indices,
                                            int64_t axisAttr, const std::string &where) {
  const int64_t rank = static_cast<int64_t>(data.rank());
  if (rank == 0)
    return Status::error(where, "input 'data' must have rank >= 1");
  if (indices.rank() != data.rank())
    return Status::error(where, "input 'indices' " + indices.str() + " must have the rank of " +
                                    "'data' " + data.str());
  DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axisAttr, rank, where));
  for (int64_t k = 0; k < rank; ++k) {
    const ir::Dim &d = data[static_cast<size_t>(k)], &i = indices[static_cast<size_t>(k)];
    if (k != axis && d.isStatic() && i.isStatic() && i.value() > d.value())
      return Status::error(where, "input 'indices' " + indices.str() + " is larger than 'data' " +
                                      data.str() + " on axis " + std::to_string(k));
  }
  return axis;
}

} // namespace

OpDef defineGatherElements() {
  OpDef d;
  d.name = "GatherElements";
  d.version(11)
      .in("data", "T")
      .in("indices", "Tind")
      .out("output", "T")
      .attr("axis", ir::AttrKind::kInt)
      .type("T", kAllTypes & ~bit(ir::DType::kBFloat16))
      .type("Tind", kInt32Or64Types);
  d.version(13).type("T", kAllTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &data = ctx.inputShape(0);
    const ir::Shape &indices = ctx.inputShape(1);
    if (data.hasRank() && indices.hasRank())
      DTC_RETURN_IF_ERROR(checkGatherElementsShapes(data, indices, ctx.node().attrInt("axis", 0),
                                                    ctx.node().where())
                              .status());
    ctx.setOutputShape(0, indices);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    const ir::TensorData &data = *ctx.input(0);
    const ir::TensorData &indices = *ctx.input(1);
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         checkGatherElementsShapes(ir::Shape::ofStatic(data.dims()),
                                                   ir::Shape::ofStatic(indices.dims()),
                                                   ctx.node().attrInt("axis", 0), where));
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, indices.toInt64s());
    const std::vector<int64_t> &dims = data.dims(), &outDims = indices.dims();
    const std::vector<int64_t> inStrides = rowMajorStrides(dims);
    const std::vector<int64_t> outStrides = rowMajorStrides(outDims);
    const int64_t n = dims[static_cast<size_t>(axis)];
    for (int64_t &v : idx) {
      if (v < -n || v >= n)
        return ctx.error("index " + std::to_string(v) + " is out of range for axis " +
                         std::to_string(axis) + " of size " + std::to_string(n));
      if (v < 0)
        v += n;
    }
    auto src = [&](int64_t k) {
      int64_t off = 0, rest = k;
      for (size_t a = 0; a < outDims.size(); ++a) {
        int64_t c = rest / outStrides[a];
        rest %= outStrides[a];
        off += (static_cast<int64_t>(a) == axis ? idx[static_cast<size_t>(k)] : c) * inStrides[a];
      }
      return off;
    };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         remapElements(ctx.node().output(0)->name(), data, outDims, src, where));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = ai.dtc.GatherElementsGrad(dY, indices): zeros of the data's shape with every dY element
  // added at its index (repeated indices accumulate), as torch.gather's backward (scatter_add).
  d.gradient = [](GradientContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const std::vector<int64_t> dims = ctx.input(0)->shape().staticSizes();
    DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(n.attrInt("axis", 0),
                                                     static_cast<int64_t>(dims.size()), n.where()));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("GatherElementsGrad", {ctx.outputGrad(0), ctx.input(1)},
                                   {{"axis", ir::Attribute(axis)}, {"shape", ir::Attribute(dims)}},
                                   "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
