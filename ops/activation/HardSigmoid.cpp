// HardSigmoid: elementwise max(0, min(1, alpha * x + beta)), alpha 0.2 and beta 0.5 by default
// (ONNX HardSigmoid-6, unchanged up to opset 21).
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineHardSigmoid() {
  OpDef d;
  d.name = "HardSigmoid";
  d.version(6)
      .in("X", "T")
      .out("Y", "T")
      .attr("alpha", ir::AttrKind::kFloat)
      .attr("beta", ir::AttrKind::kFloat)
      .type("T", kFloatNoBf16Types);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
