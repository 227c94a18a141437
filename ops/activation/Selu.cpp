// Selu: elementwise gamma (x > 0 ? x : alpha (e^x - 1)) with alpha 1.67326319 and gamma
// 1.05070102 by default (ONNX Selu-6, unchanged up to opset 21; f16, f32, f64). Folds. Gradient
// dX = X > 0 ? gamma dY : gamma alpha e^X dY (gamma alpha dY at 0, as PyTorch's elu_backward with
// selu's scales).
#include "ops/activation/Activation.h"

#include <cmath>

namespace dtc::ops {

OpDef defineSelu() {
  return activationDef(
      "Selu", 6, kFloatNoBf16Types, "selu",
      [](double x, double a, double g) { return g * (x > 0 ? x : a * std::expm1(x)); },
      {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}});
}

} // namespace dtc::ops
