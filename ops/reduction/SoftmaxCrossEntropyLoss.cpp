// SoftmaxCrossEntropyLoss: loss = -weights[label] * log_softmax(scores, axis 1)[label] per
// sample, reduced by `reduction` (none | mean, the default | sum); labels equal to
// `ignore_index` contribute nothing. ONNX SoftmaxCrossEntropyLoss-12 is the first version (the
// op does not exist before opset 12); -13 adds bfloat16. Shapes: see inferLoss (Reduce.h).
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineSoftmaxCrossEntropyLoss() {
  OpDef d;
  d.name = "SoftmaxCrossEntropyLoss";
  d.version(12)
      .in("scores", "T")
      .in("labels", "Tind")
      .optIn("weights", "T")
      .out("output", "T")
      .optOut("log_prob", "T")
      .attr("ignore_index", ir::AttrKind::kInt)
      .attr("reduction", ir::AttrKind::kString)
      .type("T", bit(ir::DType::kFloat16) | bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64))
      .type("Tind", kInt32Or64Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferLoss;
  return d;
}

} // namespace dtc::ops
