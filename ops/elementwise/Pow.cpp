// Pow: X ** Y elementwise with broadcasting. From opset 12 the exponent may have its own type
// (T1 for the base, T2 for the exponent); the output has the base's type.
#include "ops/elementwise/Elementwise.h"

#include <cmath>

namespace dtc::ops {

OpDef definePow() {
  OpDef d;
  d.name = "Pow";
  d.version(7).in("X", "T").in("Y", "T").out("Z", "T").type("T", kFloatTypes);
  OpVersion &v12 = d.version(12);
  v12.inputs[1].typeVar = "T1";
  v12.type("T", kNumericTypes).type("T1", kNumericTypes);
  d.infer = inferBroadcast;
  return d;
}

} // namespace dtc::ops
