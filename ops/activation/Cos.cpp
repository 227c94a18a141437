// Cos: elementwise cosine (ONNX Cos-7, unchanged up to opset 21; f16, f32, f64). Folds.
// Gradient dX = -dY sin(X).
#include "ops/activation/Activation.h"

#include <cmath>

namespace dtc::ops {

OpDef defineCos() {
  return activationDef("Cos", 7, kFloatNoBf16Types, "cos",
                       [](double x, double, double) { return std::cos(x); });
}

} // namespace dtc::ops
