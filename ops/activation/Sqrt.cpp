// STUB: Sqrt (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineSqrt() {
  OpDef d;
  d.name = "Sqrt";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
