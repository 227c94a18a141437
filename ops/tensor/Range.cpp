// Range (opset 11): the 1-D sequence start, start+delta, ... up to (excluding) limit; the three
// inputs are scalars of one type. Length = max(ceil((limit - start) / delta), 0). The length is
// inferred when the inputs are known (constants or shape values); folds constants.
#include "ops/tensor/TensorCommon.h"

#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {
namespace {

Expected<int64_t> intLength(int64_t start, int64_t limit, int64_t delta, const std::string &where) {
  if (delta == 0)
    return Status::error(where, "delta must not be 0");
  __int128 span = static_cast<__int128>(limit) - start;
  __int128 q = span / delta;
  if (q * delta != span && ((span > 0) == (delta > 0)))
    ++q;
  return q > 0 ? static_cast<int64_t>(q) : int64_t{0};
}

Expected<int64_t> floatLength(double start, double limit, double delta, bool f32,
                              const std::string &where) {
  if (delta == 0)
    return Status::error(where, "delta must not be 0");
  double q = f32 ? static_cast<double>(std::ceil(static_cast<float>(
                       static_cast<float>(limit - start) / static_cast<float>(delta))))
                 : std::ceil((limit - start) / delta);
  if (!std::isfinite(q) || q > static_cast<double>(INT64_MAX / 2))
    return Status::error(where, "range length is not finite");
  return q > 0 ? static_cast<int64_t>(q) : int64_t{0};
}

} // namespace

OpDef defineRange() {
  OpDef d;
  d.name = "Range";
  d.version(11)
      .in("start", "T")
      .in("limit", "T")
      .in("delta", "T")
      .out("output", "T")
      .type("T", bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64) | bit(ir::DType::kInt16) |
                     bit(ir::DType::kInt32) | bit(ir::DType::kInt64));
  d.infer = [](InferenceContext &ctx) -> Status {
    static const char *const kNames[] = {"start", "limit", "delta"};
    for (size_t i = 0; i < 3; ++i)
      if (ctx.inputShape(i).hasRank() && ctx.inputShape(i).rank() != 0)
        return ctx.error(std::string("input '") + kNames[i] + "' must be a scalar, got shape " +
                         ctx.inputShape(i).str());
    ir::DType t = ctx.inputDType(0);
    ir::Dim length = ir::Dim::unknown();
    if (ir::isInteger(t)) {
      std::optional<std::vector<int64_t>> s = staticInts(ctx, 0), l = staticInts(ctx, 1),
                                          dl = staticInts(ctx, 2);
      if (s && l && dl && s->size() == 1 && l->size() == 1 && dl->size() == 1) {
        DTC_ASSIGN_OR_RETURN(int64_t n, intLength((*s)[0], (*l)[0], (*dl)[0], ctx.node().where()));
        length = ir::Dim::fixed(n);
        if (n <= 1024) {
          std::vector<ir::Dim> value;
          for (int64_t k = 0; k < n; ++k)
            value.push_back(ir::Dim::fixed((*s)[0] + k * (*dl)[0]));
          ctx.setShapeValue(0, std::move(value));
        }
      } else {
        // Range(0, T, 1) on a symbolic T (positions of a dynamic sequence): length T.
        const std::vector<ir::Dim> *sv = ctx.shapeValue(0), *lv = ctx.shapeValue(1),
                                   *dv = ctx.shapeValue(2);
        if (sv && lv && dv && sv->size() == 1 && lv->size() == 1 && dv->size() == 1 &&
            (*sv)[0] == ir::Dim::fixed(0) && (*dv)[0] == ir::Dim::fixed(1) &&
            !(*lv)[0].isUnknown())
          length = (*lv)[0];
      }
    } else {
      ir::TensorDataPtr s = ctx.constantInput(0), l = ctx.constantInput(1),
                        dl = ctx.constantInput(2);
      if (s && l && dl) {
        auto sv = s->toDoubles(), lv = l->toDoubles(), dv = dl->toDoubles();
        if (sv && lv && dv && sv->size() == 1 && lv->size() == 1 && dv->size() == 1) {
          DTC_ASSIGN_OR_RETURN(int64_t n,
                               floatLength((*sv)[0], (*lv)[0], (*dv)[0], t == ir::DType::kFloat32,
                                           ctx.node().where()));
          length = ir::Dim::fixed(n);
        }
      }
    }
    ctx.setOutputShape(0, ir::Shape({length}));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    ir::DType t = ctx.input(0)->dtype();
    for (size_t i = 0; i < 3; ++i)
      if (ctx.input(i)->numElements() != 1 || ctx.input(i)->dtype() != t)
        return ctx.error("start, limit and delta must be scalars of one type");
    const std::string &name = ctx.node().output(0)->name();
    if (ir::isInteger(t)) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> s, ctx.input(0)->toInt64s());
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> l, ctx.input(1)->toInt64s());
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> dl, ctx.input(2)->toInt64s());
      DTC_ASSIGN_OR_RETURN(int64_t n, intLength(s[0], l[0], dl[0], where));
      if (n > kMaxFoldElements)
        return ctx.error("range of " + std::to_string(n) + " elements is too large to fold");
      std::vector<int64_t> values;
      for (int64_t k = 0; k < n; ++k)
        values.push_back(s[0] + k * dl[0]);
      if (t == ir::DType::kInt64)
        return std::vector<ir::TensorDataPtr>{ir::TensorData::fromInt64s(name, {n}, values)};
      return std::vector<ir::TensorDataPtr>{
          makeTensor(name, t, {n}, std::vector<double>(values.begin(), values.end()))};
    }
    DTC_ASSIGN_OR_RETURN(std::vector<double> s, ctx.input(0)->toDoubles());
    DTC_ASSIGN_OR_RETURN(std::vector<double> l, ctx.input(1)->toDoubles());
    DTC_ASSIGN_OR_RETURN(std::vector<double> dl, ctx.input(2)->toDoubles());
    bool f32 = t == ir::DType::kFloat32;
    DTC_ASSIGN_OR_RETURN(int64_t n, floatLength(s[0], l[0], dl[0], f32, where));
    if (n > kMaxFoldElements)
      return ctx.error("range of " + std::to_string(n) + " elements is too large to fold");
    std::vector<double> values;
    for (int64_t k = 0; k < n; ++k)
      values.push_back(f32 ? static_cast<double>(static_cast<float>(s[0]) +
                                                 static_cast<float>(k) * static_cast<float>(dl[0]))
                           : s[0] + static_cast<double>(k) * dl[0]);
    return std::vector<ir::TensorDataPtr>{makeTensor(name, t, {n}, values)};
  };
  // output[i] = start + i * delta: one multiply-add (2 FLOPs) per element.
  d.cost = elementwiseCost(2);
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
