// Elu: elementwise x >= 0 ? x : alpha (e^x - 1), alpha 1 by default (ONNX Elu-6, unchanged up
// to opset 21; f16, f32, f64). Folds. Gradient dX = X > 0 ? dY : alpha e^X dY (alpha dY at 0, as
// PyTorch's elu_backward and oneDNN's elu backward).
#include "ops/activation/Activation.h"

#include <cmath>

namespace dtc::ops {

OpDef defineElu() {
  return activationDef("Elu", 6, kFloatNoBf16Types, "elu",
                       [](double x, double a, double) { return x >= 0 ? x : a * std::expm1(x); },
                       {{"alpha", 1.f}});
}

} // namespace dtc::ops
