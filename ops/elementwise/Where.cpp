// Where: elementwise select, condition ? X : Y, with three-way broadcasting (opset 9 on). Folds
// (the causal masks of transformer exports are Where(LessOrEqual(Range, Range), 0, -inf) chains
// of constants once shapes are static).
#include "ops/elementwise/Elementwise.h"

#include "ops/ShapeHelpers.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

#include <cstring>

namespace dtc::ops {

OpDef defineWhere() {
  OpDef d;
  d.name = "Where";
  d.version(9)
      .in("condition", "B")
      .in("X", "T")
      .in("Y", "T")
      .out("output", "T")
      .type("B", kBoolType)
      .type("T", kAllTypes);
  d.infer = inferBroadcast;
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &c = *ctx.input(0), &x = *ctx.input(1), &y = *ctx.input(2);
    if (x.dtype() == ir::DType::kString)
      return ctx.error("cannot fold a Where of strings");
    DTC_ASSIGN_OR_RETURN(ir::Shape outShape, broadcastShapes({ir::Shape::ofStatic(c.dims()),
                                                              ir::Shape::ofStatic(x.dims()),
                                                              ir::Shape::ofStatic(y.dims())},
                                                             ctx.node().where()));
    const std::vector<int64_t> dims = outShape.staticSizes();
    const int64_t n = outShape.numElements().value_or(0);
    if (n > kMaxFoldElements)
      return ctx.error("result too large to fold");
    // Element strides of each operand in the output's index space (0 on broadcast axes).
    auto strides = [&](const std::vector<int64_t> &d) {
      std::vector<int64_t> st(dims.size(), 0);
      int64_t s = 1;
      for (size_t k = 0; k < d.size(); ++k) {
        size_t axis = dims.size() - 1 - k, src = d.size() - 1 - k;
        st[axis] = d[src] == 1 ? 0 : s;
        s *= d[src];
      }
      return st;
    };
    const std::vector<int64_t> sc = strides(c.dims()), sx = strides(x.dims()),
                               sy = strides(y.dims());
    DTC_ASSIGN_OR_RETURN(const std::string *cb, c.bytes());
    DTC_ASSIGN_OR_RETURN(const std::string *xb, x.bytes());
    DTC_ASSIGN_OR_RETURN(const std::string *yb, y.bytes());
    const size_t elem = static_cast<size_t>(ir::dtypeSize(x.dtype()));
    std::string out(static_cast<size_t>(n) * elem, '\0');
    for (int64_t o = 0; o < n; ++o) {
      int64_t ic = 0, ix = 0, iy = 0, rest = o;
      for (size_t k = dims.size(); k-- > 0;) {
        const int64_t idx = rest % dims[k];
        rest /= dims[k];
        ic += idx * sc[k];
        ix += idx * sx[k];
        iy += idx * sy[k];
      }
      const bool pick = (*cb)[static_cast<size_t>(ic)] != 0;
      const char *src = pick ? xb->data() + ix * static_cast<int64_t>(elem)
                             : yb->data() + iy * static_cast<int64_t>(elem);
      std::memcpy(out.data() + static_cast<size_t>(o) * elem, src, elem);
    }
    return std::vector<ir::TensorDataPtr>{
        ir::TensorData::fromBytes(ctx.node().output(0)->name(), x.dtype(), dims, std::move(out))};
  };
  // The condition gets none (bool). dX = condition ? dOut : 0 and dY = condition ? 0 : dOut:
  // the unselected branch gets exactly 0 (even where its value is inf or NaN), as PyTorch's
  // where backward; each summed down to its input's shape.
  d.gradient = [](GradientContext &ctx) -> Status {
    for (size_t i = 1; i < 3; ++i) {
      if (!ctx.needsGrad(i))
        continue;
      ir::Value *dy = ctx.outputGrad(0);
      if (dy->dtype() != ir::DType::kFloat32)
        return ctx.error("gradient: Where's gradient rule supports f32 (got " +
                         std::string(ir::dtypeName(dy->dtype())) + ")");
      ir::Value *zero = ctx.constantF32(0.f);
      std::vector<ir::Value *> ins = {ctx.input(0), i == 1 ? dy : zero, i == 1 ? zero : dy};
      DTC_ASSIGN_OR_RETURN(ir::Value * full, ctx.emit1("Where", ins));
      DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(full, ctx.input(i)->shape()));
      ctx.setInputGrad(i, g);
    }
    return Status::ok();
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
