// STUB: Gather (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineGather() {
  OpDef d;
  d.name = "Gather";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
