// BitwiseNot: elementwise bitwise complement of an integer tensor (ONNX BitwiseNot-18). Same
// type and shape out; folds (~x of the int64 value, narrowed to the type: for unsigned types
// the complement within the type's width). No gradient (integers).
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineBitwiseNot() {
  OpDef d = unaryDef("BitwiseNot", 18, kIntTypes);
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &x = *ctx.input(0);
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> v, x.toInt64s());
    for (int64_t &e : v)
      e = ~e;
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         castTensor(*ir::TensorData::fromInt64s("tmp", x.dims(), v), x.dtype(),
                                    ctx.node().output(0)->name(), ctx.node().where(),
                                    "BitwiseNot"));
    return std::vector<ir::TensorDataPtr>{t};
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
