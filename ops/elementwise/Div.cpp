// Div: elementwise division (integer division truncates toward zero, as in C) with ONNX multidirectional broadcasting (opset 7 on; later versions
// only widen the type set). Folds on int64 and float constants.
#include "ops/elementwise/Elementwise.h"

#include <climits>
#include <cmath>

namespace dtc::ops {

OpDef defineDiv() {
  OpDef d;
  d.name = "Div";
  d.version(7).in("A", "T").in("B", "T").out("C", "T").type("T", kNumericTypes);
  d.infer = inferBroadcast;
  d.fold = [](FoldContext &ctx) {
    return foldBinary(
        ctx, [](int64_t a, int64_t b) -> Expected<int64_t> { if (b == 0) return Status::error("integer division by zero"); if (a == INT64_MIN && b == -1) return Status::error("int64 overflow in Div"); return a / b; },
        [](double a, double b) { return a / b; });
  };
  return d;
}

} // namespace dtc::ops
