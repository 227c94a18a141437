// NegativeLogLikelihoodLoss: loss = -weight[target] * input[target] per sample (input holds
// log-probabilities (N, C, d1..dk)), reduced by `reduction` (none | mean, the default | sum);
// targets equal to `ignore_index` contribute nothing. ONNX NegativeLogLikelihoodLoss-12 is the
// first version (absent before opset 12); -13 adds bfloat16. Shapes: see inferLoss (Reduce.h).
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineNegativeLogLikelihoodLoss() {
  OpDef d;
  d.name = "NegativeLogLikelihoodLoss";
  d.version(12)
      .in("input", "T")
      .in("target", "Tind")
      .optIn("weight", "T")
      .out("loss", "T")
      .attr("ignore_index", ir::AttrKind::kInt)
      .attr("reduction", ir::AttrKind::kString)
      .type("T", bit(ir::DType::kFloat16) | bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64))
      .type("Tind", kInt32Or64Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferLoss;
  return d;
}

} // namespace dtc::ops
