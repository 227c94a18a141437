// Equal: elementwise comparison A == B with broadcasting; bool output.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineEqual() {
  OpDef d;
  d.name = "Equal";
  d.version(7).in("A", "T").in("B", "T").out("C", "T1").type("T", kNumericTypes | kBoolType)
      .type("T1", kBoolType);
  d.infer = inferBroadcast;
  d.fold = [](FoldContext &ctx) {
    return foldBinary(
        ctx, [](int64_t a, int64_t b) -> Expected<int64_t> { return a == b ? 1 : 0; },
        [](double a, double b) { return a == b ? 1.0 : 0.0; }, ir::DType::kBool);
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
