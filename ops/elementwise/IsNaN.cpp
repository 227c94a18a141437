// IsNaN: true where a float element is NaN (ONNX IsNaN-9; IsNaN-13 adds bfloat16, IsNaN-20
// float8 types dtc does not have). Bool output of the input's shape; folds. No gradient (bool).
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineIsNaN() {
  OpDef d;
  d.name = "IsNaN";
  d.version(9).in("X", "T1").out("Y", "T2").type("T1", kFloatNoBf16Types).type("T2", kBoolType);
  d.version(13).type("T1", kFloatTypes);
  d.version(20);
  d.infer = inferSameShape;
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(*ctx.input(0)));
    for (double &x : v)
      x = std::isnan(x) ? 1 : 0;
    return std::vector<ir::TensorDataPtr>{
        makeTensor(ctx.node().output(0)->name(), ir::DType::kBool, ctx.input(0)->dims(), v)};
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
