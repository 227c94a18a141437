// STUB: Split (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineSplit() {
  OpDef d;
  d.name = "Split";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
