// STUB: Flatten (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineFlatten() {
  OpDef d;
  d.name = "Flatten";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
