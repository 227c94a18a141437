// Sin: elementwise sine (ONNX Sin-7, unchanged up to opset 21; f16, f32, f64). Folds.
// Gradient dX = dY cos(X).
#include "ops/activation/Activation.h"

#include <cmath>

namespace dtc::ops {

OpDef defineSin() {
  return activationDef("Sin", 7, kFloatNoBf16Types, "sin",
                       [](double x, double, double) { return std::sin(x); });
}

} // namespace dtc::ops
