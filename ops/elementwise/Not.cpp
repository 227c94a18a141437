// Not: elementwise logical negation of a bool tensor.
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineNot() {
  OpDef d = unaryDef("Not", 1, kBoolType);
  d.cost = elementwiseCost();
  return d;
}

} // namespace dtc::ops
