// Sign: elementwise sign (-1, 0 or 1; NaN stays NaN) of a numeric tensor (ONNX Sign-9; Sign-13
// adds bfloat16). Same type and shape out; folds. The gradient is zero
// almost everywhere and taken as zero everywhere, as PyTorch's sign backward.
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

OpDef defineSign() {
  OpDef d = unaryDef("Sign", 9, kFloatNoBf16Types | kIntTypes);
  d.version(13).type("T", kNumericTypes);
  d.fold = [](FoldContext &ctx) {
    return foldUnary(
        ctx, [](double x) { return std::isnan(x) ? x : static_cast<double>((x > 0) - (x < 0)); });
  };
  d.gradient = zeroGradient;
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
