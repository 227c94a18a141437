// IsInf: true where a float element is +inf (when detect_positive, default 1) or -inf (when
// detect_negative, default 1) (ONNX IsInf-10; IsInf-20 adds bfloat16, float16 and float8 types).
// Bool output of the input's shape; folds. No gradient (bool).
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineIsInf() {
  OpDef d;
  d.name = "IsInf";
  d.version(10)
      .in("X", "T1")
      .out("Y", "T2")
      .attr("detect_negative", ir::AttrKind::kInt)
      .attr("detect_positive", ir::AttrKind::kInt)
      .type("T1", bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64))
      .type("T2", kBoolType);
  d.version(20).type("T1", kFloatTypes);
  d.infer = inferSameShape;
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const bool neg = ctx.node().attrInt("detect_negative", 1) != 0;
    const bool pos = ctx.node().attrInt("detect_positive", 1) != 0;
    DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(*ctx.input(0)));
    for (double &x : v)
      x = std::isinf(x) && (x > 0 ? pos : neg) ? 1 : 0;
    return std::vector<ir::TensorDataPtr>{
        makeTensor(ctx.node().output(0)->name(), ir::DType::kBool, ctx.input(0)->dims(), v)};
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
