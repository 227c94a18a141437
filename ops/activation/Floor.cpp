// Floor: elementwise floor (round toward -inf) of a float tensor (ONNX Floor-6; Floor-13 adds
// bfloat16). Same type and shape out; folds. The gradient is zero
// almost everywhere and taken as zero everywhere, as PyTorch's floor backward.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineFloor() {
  OpDef d = unaryDef("Floor", 6, kFloatNoBf16Types);
  d.version(13).type("T", kFloatTypes);
  d.fold = [](FoldContext &ctx) { return foldUnary(ctx, [](double x) { return std::floor(x); }); };
  d.gradient = zeroGradient;
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
