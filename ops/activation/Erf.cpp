// Erf: elementwise error function (ONNX Erf-9, the first version: the op does not exist in
// opsets 7-8; Erf-13 adds bfloat16). Exporters emit it for exact GELU before opset 20.
// One input X, output Y of the same type and shape; no attributes, no normalization.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineErf() {
  OpDef d;
  d.name = "Erf";
  d.version(9).in("X", "T").out("Y", "T").type("T", kFloatNoBf16Types | kIntTypes);
  d.version(13).type("T", kNumericTypes);
  d.infer = inferSameShape;
  // dX = dY * 2/sqrt(pi) * exp(-X^2).
  d.gradient = [](GradientContext &ctx) { return eltwiseGradRule(ctx, "erf", false); };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
