// Round: elementwise rounding to the nearest integer, halves to even (0.5 -> 0, 1.5 -> 2, -2.5
// -> -2), of a float tensor (ONNX Round-11; Round-22, beyond dtc's opsets, adds bfloat16). Same
// type and shape out; folds. The gradient is zero almost everywhere and taken as zero everywhere,
// as PyTorch's round backward.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineRound() {
  OpDef d = unaryDef("Round", 11, kFloatNoBf16Types);
  d.fold = [](FoldContext &ctx) {
    return foldUnary(ctx, [](double x) { return std::nearbyint(x); });
  };
  d.gradient = zeroGradient;
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
