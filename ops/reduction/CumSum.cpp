// CumSum: cumulative sum of x along the axis given by input 1 (a 0-D or one-element int32/int64
// tensor, in [-r, r)), inclusive by default; `exclusive` = 1 leaves out the element itself (the
// first sum is 0), `reverse` = 1 sums from the end (ONNX CumSum-11; CumSum-14 adds float16 and
// bfloat16). Exports compute GPT-2's position ids as CumSum(attention_mask) - 1. Output of x's
// type and shape; sums run in order in x's type (numpy's cumsum, onnxruntime). Folds.
#include "ops/ShapeHelpers.h"
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

constexpr TypeMask kCumSumTypes = bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64) |
                                  bit(ir::DType::kInt32) | bit(ir::DType::kInt64) |
                                  bit(ir::DType::kUInt32) | bit(ir::DType::kUInt64);

/// The axis of a constant axis tensor, normalized to [0, rank); errors name the node.
Expected<int64_t> cumSumAxis(const std::vector<int64_t> &axis, int64_t rank,
                             const std::string &where) {
  if (axis.size() != 1)
    return Status::error(where,
                         "input 'axis' must hold one element, got " + std::to_string(axis.size()));
  return normalizeAxis(axis[0], rank, where);
}

} // namespace

OpDef defineCumSum() {
  OpDef d;
  d.name = "CumSum";
  d.version(11)
      .in("x", "T")
      .in("axis", "T2")
      .out("y", "T")
      .attr("exclusive", ir::AttrKind::kInt)
      .attr("reverse", ir::AttrKind::kInt)
      .type("T", kCumSumTypes)
      .type("T2", kInt32Or64Types);
  d.version(14).type("T", kCumSumTypes | bit(ir::DType::kFloat16) | bit(ir::DType::kBFloat16));
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &x = ctx.inputShape(0);
    const ir::Shape &axis = ctx.inputShape(1);
    if (axis.hasRank() && axis.rank() > 1)
      return ctx.error("input 'axis' must be a scalar, got rank " + std::to_string(axis.rank()));
    if (x.hasRank() && x.rank() == 0)
      return ctx.error("input 'x' must have rank >= 1");
    if (x.hasRank() && ctx.constantInput(1)) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> a, ctx.constantInts(1, "input 'axis'"));
      DTC_RETURN_IF_ERROR(
          cumSumAxis(a, static_cast<int64_t>(x.rank()), ctx.node().where()).status());
    }
    ctx.setOutputShape(0, x);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &x = *ctx.input(0);
    const std::vector<int64_t> &dims = x.dims();
    if (dims.empty())
      return ctx.error("input 'x' must have rank >= 1");
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> a, ctx.input(1)->toInt64s());
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         cumSumAxis(a, static_cast<int64_t>(dims.size()), ctx.node().where()));
    const bool exclusive = ctx.node().attrInt("exclusive", 0) != 0;
    const bool reverse = ctx.node().attrInt("reverse", 0) != 0;
    int64_t inner = 1, outer = 1;
    for (size_t k = 0; k < dims.size(); ++k) {
      if (static_cast<int64_t>(k) < axis)
        outer *= dims[k];
      else if (static_cast<int64_t>(k) > axis)
        inner *= dims[k];
    }
    const int64_t n = dims[static_cast<size_t>(axis)];
    const std::string &name = ctx.node().output(0)->name();
    auto scan = [&](auto &v, auto zero) {
      auto out = v;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          auto acc = zero;
          for (int64_t s = 0; s < n; ++s) {
            int64_t j = reverse ? n - 1 - s : s;
            size_t at = static_cast<size_t>((o * n + j) * inner + i);
            auto value = v[at];
            if (!exclusive)
              acc += value;
            out[at] = acc;
            if (exclusive)
              acc += value;
          }
        }
      return out;
    };
    if (ir::isInteger(x.dtype())) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> v, x.toInt64s());
      std::vector<int64_t> out = scan(v, int64_t{0});
      if (x.dtype() == ir::DType::kInt64)
        return std::vector<ir::TensorDataPtr>{ir::TensorData::fromInt64s(name, dims, out)};
      std::vector<double> asDoubles(out.begin(), out.end());
      return std::vector<ir::TensorDataPtr>{makeTensor(name, x.dtype(), dims, asDoubles)};
    }
    DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(x));
    if (x.dtype() == ir::DType::kFloat32) {
      std::vector<float> f(v.begin(), v.end());
      std::vector<float> out = scan(f, 0.f); // sums in f32, as the kernel
      return std::vector<ir::TensorDataPtr>{ir::TensorData::fromFloats(name, dims, out)};
    }
    std::vector<double> out = scan(v, 0.0);
    return std::vector<ir::TensorDataPtr>{makeTensor(name, x.dtype(), dims, out)};
  };
  // y_j = sum over i <= j (i < j when exclusive) of x_i, so dx_i = sum over j >= i (j > i) of
  // dy_j: the cumulative sum of dY in the other direction with the same `exclusive`.
  d.gradient = [](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    const ir::Node &n = ctx.node();
    const int64_t exclusive = n.attrInt("exclusive", 0) != 0 ? 1 : 0;
    const int64_t reverse = n.attrInt("reverse", 0) != 0 ? 0 : 1;
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("CumSum", {ctx.outputGrad(0), ctx.input(1)},
                                                   {{"exclusive", ir::Attribute(exclusive)},
                                                    {"reverse", ir::Attribute(reverse)}}));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // One add per element of x.
  d.cost = reductionCost();
  d.sharding = cumSumSharding();
  return d;
}

} // namespace dtc::ops
