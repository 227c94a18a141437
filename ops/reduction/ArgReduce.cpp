// The shared definition of ArgMax and ArgMin (ops/reduction/ArgMax.cpp, ArgMin.cpp).
#include "ops/ShapeHelpers.h"
#include "ops/activation/Activation.h"
#include "ops/reduction/Reduce.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef argReduceDef(const std::string &name) {
  OpDef d;
  d.name = name;
  const TypeMask older = kReduceTypes | bit(ir::DType::kInt8) | bit(ir::DType::kInt16) |
                         bit(ir::DType::kUInt8) | bit(ir::DType::kUInt16);
  d.version(1)
      .in("data", "T")
      .out("reduced", "I")
      .attr("axis", ir::AttrKind::kInt)
      .attr("keepdims", ir::AttrKind::kInt)
      .type("T", older)
      .type("I", kInt64Type);
  d.version(11);
  d.version(12).attr("select_last_index", ir::AttrKind::kInt);
  d.version(13).type("T", older | bit(ir::DType::kBFloat16));
  d.normalize = [](ir::Node &node, NormalizeContext &ctx) -> Status {
    if (ctx.opset() < 11 && node.attrInt("axis", 0) < 0)
      return Status::error(node.where(), "a negative axis is not allowed before opset 11 (model "
                                         "opset " +
                                             std::to_string(ctx.opset()) + ")");
    return Status::ok();
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &x = ctx.inputShape(0);
    if (!x.hasRank())
      return Status::ok();
    if (x.rank() == 0)
      return ctx.error("input 'data' must have rank >= 1");
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeAxis(ctx.node().attrInt("axis", 0),
                                       static_cast<int64_t>(x.rank()), ctx.node().where()));
    std::vector<ir::Dim> out = x.dims();
    if (ctx.node().attrInt("keepdims", 1) != 0)
      out[static_cast<size_t>(axis)] = ir::Dim::fixed(1);
    else
      out.erase(out.begin() + axis);
    ctx.setOutputShape(0, ir::Shape(std::move(out)));
    return Status::ok();
  };
  const bool isMax = name == "ArgMax";
  d.fold = [isMax](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &x = *ctx.input(0);
    const std::vector<int64_t> &dims = x.dims();
    if (dims.empty())
      return ctx.error("input 'data' must have rank >= 1");
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeAxis(ctx.node().attrInt("axis", 0),
                                       static_cast<int64_t>(dims.size()), ctx.node().where()));
    const bool last = ctx.node().attrInt("select_last_index", 0) != 0;
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < dims.size(); ++k)
      (static_cast<int64_t>(k) < axis ? outer : inner) *=
          static_cast<int64_t>(k) == axis ? 1 : dims[k];
    const int64_t n = dims[static_cast<size_t>(axis)];
    if (n == 0)
      return ctx.error("cannot take " + ctx.node().opType() + " over an empty axis");
    std::vector<int64_t> out;
    auto scan = [&](const auto &v) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          auto at = [&](int64_t j) { return v[static_cast<size_t>((o * n + j) * inner + i)]; };
          for (int64_t j = 1; j < n; ++j) {
            auto a = at(j), b = at(best);
            bool better;
            if constexpr (std::is_floating_point_v<std::decay_t<decltype(a)>>) {
              if (std::isnan(b))
                continue; // the first NaN stays
              better = std::isnan(a) || (isMax ? a > b : a < b) || (last && a == b);
            } else {
              better = (isMax ? a > b : a < b) || (last && a == b);
            }
            if (better)
              best = j;
          }
          out.push_back(best);
        }
    };
    if (ir::isInteger(x.dtype())) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> v, x.toInt64s());
      scan(v);
    } else {
      DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(x));
      scan(v);
    }
    std::vector<int64_t> outDims = dims;
    if (ctx.node().attrInt("keepdims", 1) != 0)
      outDims[static_cast<size_t>(axis)] = 1;
    else
      outDims.erase(outDims.begin() + axis);
    return std::vector<ir::TensorDataPtr>{
        ir::TensorData::fromInt64s(ctx.node().output(0)->name(), outDims, out)};
  };
  // One comparison per input element.
  d.cost = reductionCost();
  d.sharding = argReduceSharding();
  return d;
}

} // namespace dtc::ops
