// STUB: ReduceMax (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineReduceMax() {
  OpDef d;
  d.name = "ReduceMax";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
