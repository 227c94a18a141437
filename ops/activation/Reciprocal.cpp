// STUB: Reciprocal (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineReciprocal() {
  OpDef d;
  d.name = "Reciprocal";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
