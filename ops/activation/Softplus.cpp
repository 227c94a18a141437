// Softplus: elementwise log(1 + e^x) (ONNX Softplus-1, unchanged up to opset 21; f16, f32,
// f64). Folds. Gradient dX = dY * sigmoid(X) (oneDNN soft_relu backward; PyTorch's
// softplus_backward with beta 1 and no threshold).
#include "ops/activation/Activation.h"

#include <cmath>

namespace dtc::ops {

OpDef defineSoftplus() {
  return activationDef("Softplus", 1, kFloatNoBf16Types, "soft_relu", [](double x, double, double) {
    // log1p(e^x), written so that e^x cannot overflow.
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  });
}

} // namespace dtc::ops
