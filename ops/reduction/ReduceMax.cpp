// ReduceMax: maximum over the given axes. ONNX ReduceMax-1/11 (axes attribute; 11 allows
// negative axes), -12 (int8, uint8), -13 (bfloat16), -18 (axes become an optional int64 input,
// plus noop_with_empty_axes), -20 (bool). Canonical: the opset-20 input form.
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineReduceMax() {
  OpDef d;
  d.name = "ReduceMax";
  const TypeMask t12 = kReduceTypes | bit(ir::DType::kInt8) | bit(ir::DType::kUInt8);
  reduceAttrForm(d, 1, kReduceTypes);
  reduceAttrForm(d, 11, kReduceTypes);
  reduceAttrForm(d, 12, t12);
  reduceAttrForm(d, 13, t12 | bit(ir::DType::kBFloat16));
  reduceInputForm(d, 18);
  d.version(20).type("T", t12 | bit(ir::DType::kBFloat16) | kBoolType);
  d.normalize = reduceNormalizer(18);
  d.infer = inferReduce;
  return d;
}

} // namespace dtc::ops
