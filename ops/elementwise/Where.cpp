// Where: elementwise select, condition ? X : Y, with three-way broadcasting (opset 9 on).
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineWhere() {
  OpDef d;
  d.name = "Where";
  d.version(9).in("condition", "B").in("X", "T").in("Y", "T").out("output", "T")
      .type("B", kBoolType).type("T", kAllTypes);
  d.infer = inferBroadcast;
  return d;
}

} // namespace dtc::ops
