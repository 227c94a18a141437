// Not: elementwise logical negation of a bool tensor.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineNot() {
  OpDef d = unaryDef("Not", 1, kBoolType);
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
