// ReduceMean: mean over the given axes. ONNX ReduceMean-1/11 (axes attribute; 11 allows
// negative axes), -13 (bfloat16), -18 (axes become an optional int64 input, plus
// noop_with_empty_axes). Canonical: the opset-18 input form.
#include "ops/reduction/Reduce.h"

namespace dtc::ops {

OpDef defineReduceMean() {
  OpDef d;
  d.name = "ReduceMean";
  reduceAttrForm(d, 1, kReduceTypes);
  reduceAttrForm(d, 11, kReduceTypes);
  reduceAttrForm(d, 13, kReduceTypes | bit(ir::DType::kBFloat16));
  reduceInputForm(d, 18);
  d.normalize = reduceNormalizer(18);
  d.infer = inferReduce;
  return d;
}

} // namespace dtc::ops
