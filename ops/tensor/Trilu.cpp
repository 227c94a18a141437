// Trilu: keeps the upper (`upper` = 1, default) or lower triangle of every matrix formed by the
// last two axes of `input` (rank >= 2) and zeroes the rest: element (i, j) is kept when
// j - i >= k (upper) or j - i <= k (lower), with the optional int64 scalar input k (default 0)
// shifting the diagonal. ONNX Trilu-14. Folds; the gradient is Trilu of dY with the same k.
#include "ops/ShapeHelpers.h"
#include "ops/activation/Activation.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

#include <cstring>

namespace dtc::ops {

OpDef defineTrilu() {
  OpDef d;
  d.name = "Trilu";
  d.version(14)
      .in("input", "T")
      .optIn("k", "K")
      .out("output", "T")
      .attr("upper", ir::AttrKind::kInt)
      .type("T", kAllTypes)
      .type("K", kInt64Type);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &x = ctx.inputShape(0);
    if (x.hasRank() && x.rank() < 2)
      return ctx.error("input 'input' must have rank >= 2, got " + x.str());
    DTC_RETURN_IF_ERROR(checkScalarInput(ctx, 1, "input 'k'"));
    ctx.setOutputShape(0, x);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &x = *ctx.input(0);
    const std::vector<int64_t> &dims = x.dims();
    if (dims.size() < 2)
      return ctx.error("input 'input' must have rank >= 2");
    int64_t k = 0;
    if (ctx.numInputs() > 1 && ctx.input(1)) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ctx.input(1)->toInt64s());
      if (kv.size() != 1)
        return ctx.error("input 'k' must be a scalar");
      k = kv[0];
    }
    const bool upper = ctx.node().attrInt("upper", 1) != 0;
    const int64_t rows = dims[dims.size() - 2], cols = dims.back();
    auto src = [&](int64_t e) -> int64_t {
      const int64_t j = e % cols, i = (e / cols) % rows;
      const bool keep = upper ? j - i >= k : j - i <= k;
      return keep ? e : -1; // -1: the fill value (zeros)
    };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t, remapElements(ctx.node().output(0)->name(), x, dims,
                                                            src, ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // The mask does not depend on the values: dX = Trilu(dY, k, upper).
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    std::vector<ir::Value *> ins = {ctx.outputGrad(0)};
    if (ctx.node().numInputs() > 1 && ctx.input(1))
      ins.push_back(ctx.input(1));
    DTC_ASSIGN_OR_RETURN(
        ir::Value * dx,
        ctx.emit1("Trilu", ins, {{"upper", ir::Attribute(ctx.node().attrInt("upper", 1))}}));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
