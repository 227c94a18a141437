// STUB: Constant (to be written).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineConstant() {
  OpDef d;
  d.name = "Constant";
  d.version(1).variadicIn("X", "T").out("Y", "T").type("T", kAllTypes);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
