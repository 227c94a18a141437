// ArgMax: the int64 index of the largest element along `axis` (default 0, negative from the back
// since opset 11), the first one on ties unless `select_last_index` = 1 (opset 12); the axis is
// kept as size 1 when `keepdims` = 1 (default) or dropped. A NaN counts as largest (the first NaN
// wins), as numpy and PyTorch. ONNX ArgMax-1/11/12/13 (13 adds bfloat16). Folds; no gradient
// (int64).
#include "ops/reduction/Reduce.h"

#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineArgMax() { return argReduceDef("ArgMax"); }

} // namespace dtc::ops
