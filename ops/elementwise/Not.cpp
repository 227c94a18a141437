// Not: elementwise logical negation of a bool tensor.
#include "ops/elementwise/Elementwise.h"

namespace dtc::ops {

OpDef defineNot() { return unaryDef("Not", 1, kBoolType); }

} // namespace dtc::ops
