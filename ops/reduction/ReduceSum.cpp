// ReduceSum: sum over the given axes. ONNX ReduceSum-1/11 (axes attribute; 11 allows negative
// axes), -13 (axes become an optional int64 input, plus noop_with_empty_axes; bfloat16).
// Canonical: the opset-13 input form.
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineReduceSum() {
  OpDef d;
  d.name = "ReduceSum";
  reduceAttrForm(d, 1, kReduceTypes);
  reduceAttrForm(d, 11, kReduceTypes);
  reduceInputForm(d, 13).type("T", kReduceTypes | bit(ir::DType::kBFloat16));
  d.normalize = reduceNormalizer(13);
  d.infer = inferReduce;
  return d;
}

} // namespace dtc::ops
