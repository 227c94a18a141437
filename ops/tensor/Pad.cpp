// STUB: Pad (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef definePad() {
  OpDef d;
  d.name = "Pad";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
