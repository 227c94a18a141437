// Not: elementwise logical negation of a bool tensor. Folds (the attention-mask chains of
// torch.onnx.export's dynamo exports negate constant masks: Equal -> Not -> Cast -> CumSum).
#include "ops/Sharding.h"
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineNot() {
  OpDef d = unaryDef("Not", 1, kBoolType);
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(*ctx.input(0)));
    for (double &x : v)
      x = x != 0 ? 0 : 1;
    return std::vector<ir::TensorDataPtr>{
        makeTensor(ctx.node().output(0)->name(), ir::DType::kBool, ctx.input(0)->dims(), v)};
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
