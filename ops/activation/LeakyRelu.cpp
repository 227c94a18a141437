// LeakyRelu: elementwise x >= 0 ? x : alpha * x, alpha defaults to 0.01 (ONNX LeakyRelu-6;
// LeakyRelu-16 adds bfloat16). Same form in every version from opset 7 on.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineLeakyRelu() {
  OpDef d;
  d.name = "LeakyRelu";
  d.version(6)
      .in("X", "T")
      .out("Y", "T")
      .attr("alpha", ir::AttrKind::kFloat)
      .type("T", kFloatNoBf16Types);
  d.version(16).type("T", kFloatTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
