// OneHot: output = off_value everywhere except on_value at [.., indices[p], ..] along the new
// axis `axis` (default -1, in [-r-1, r]) of length `depth` (a numeric scalar or one-element
// tensor; float depths and indices are truncated toward zero); values = [off_value, on_value].
// Negative indices count from the back (opset 11); indices outside [-depth, depth-1] give an
// all-off row. ONNX OneHot-9/11. Folds; no gradient (indices are discrete, values constant).
#include "ops/ShapeHelpers.h"
#include "ops/activation/Activation.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

#include <cmath>
#include <cstring>

namespace dtc::ops {

OpDef defineOneHot() {
  OpDef d;
  d.name = "OneHot";
  const TypeMask numeric = kNumericTypes & ~bit(ir::DType::kBFloat16);
  d.version(9)
      .in("indices", "T1")
      .in("depth", "T2")
      .in("values", "T3")
      .out("output", "T3")
      .attr("axis", ir::AttrKind::kInt)
      .type("T1", numeric)
      .type("T2", numeric)
      .type("T3", kAllTypes & ~bit(ir::DType::kBFloat16));
  d.version(11);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 1, "input 'depth'"));
    const ir::Shape &values = ctx.inputShape(2);
    if (values.isStatic() && values.numElements().value_or(0) != 2)
      return ctx.error("input 'values' must hold [off_value, on_value], got shape " + values.str());
    const ir::Shape &idx = ctx.inputShape(0);
    if (!idx.hasRank())
      return Status::ok();
    const int64_t r = static_cast<int64_t>(idx.rank());
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeAxis(ctx.node().attrInt("axis", -1), r + 1, ctx.node().where()));
    ir::Dim depth = ir::Dim::unknown();
    if (ir::TensorDataPtr c = ctx.constantInput(1)) {
      DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(*c));
      if (v.size() != 1 || !(v[0] >= 1))
        return ctx.error("input 'depth' must be a positive scalar");
      depth = ir::Dim::fixed(static_cast<int64_t>(v[0]));
    }
    std::vector<ir::Dim> out = idx.dims();
    out.insert(out.begin() + axis, depth);
    ctx.setOutputShape(0, ir::Shape(std::move(out)));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &indices = *ctx.input(0), &values = *ctx.input(2);
    DTC_ASSIGN_OR_RETURN(std::vector<double> dv, elementsAsDoubles(*ctx.input(1)));
    if (dv.size() != 1 || !(dv[0] >= 1))
      return ctx.error("input 'depth' must be a positive scalar");
    if (values.numElements() != 2)
      return ctx.error("input 'values' must hold [off_value, on_value]");
    const int64_t depth = static_cast<int64_t>(dv[0]);
    const std::vector<int64_t> &id = indices.dims();
    const int64_t r = static_cast<int64_t>(id.size());
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeAxis(ctx.node().attrInt("axis", -1), r + 1, ctx.node().where()));
    DTC_ASSIGN_OR_RETURN(std::vector<double> iv, elementsAsDoubles(indices));
    std::vector<int64_t> outDims = id;
    outDims.insert(outDims.begin() + axis, depth);
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < r; ++k)
      (k < axis ? outer : inner) *= id[static_cast<size_t>(k)];
    // Element k of the output: (o, j, i) over (outer, depth, inner); on when indices[o, i] == j.
    auto src = [&](int64_t k) -> int64_t {
      const int64_t i = k % inner, j = (k / inner) % depth, o = k / inner / depth;
      int64_t v = static_cast<int64_t>(std::trunc(iv[static_cast<size_t>(o * inner + i)]));
      if (v < 0)
        v += depth;
      return v == j ? 1 : 0;
    };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t, remapElements(ctx.node().output(0)->name(), values,
                                                            outDims, src, ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
