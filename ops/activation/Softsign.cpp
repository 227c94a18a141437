// Softsign: elementwise x / (1 + |x|) (ONNX Softsign-1, unchanged up to opset 21; f16, f32,
// f64). Folds. Gradient dX = dY / (1 + |X|)^2 (PyTorch's softsign derivative).
#include "ops/activation/Activation.h"

#include <cmath>

namespace dtc::ops {

OpDef defineSoftsign() {
  return activationDef("Softsign", 1, kFloatNoBf16Types, "softsign",
                       [](double x, double, double) { return x / (1 + std::fabs(x)); });
}

} // namespace dtc::ops
