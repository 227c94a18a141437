// Ceil: elementwise ceiling (round toward +inf) of a float tensor (ONNX Ceil-6; Ceil-13 adds
// bfloat16). Same type and shape out; folds. The gradient is zero
// almost everywhere and taken as zero everywhere, as PyTorch's ceil backward.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineCeil() {
  OpDef d = unaryDef("Ceil", 6, kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.fold = [](FoldContext &ctx) { return foldUnary(ctx, [](double x) { return std::ceil(x); }); };
  d.gradient = zeroGradient;
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
