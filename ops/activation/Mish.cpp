// Mish: elementwise x tanh(softplus(x)) (ONNX Mish-18, the first version; f16, f32, f64).
// Folds. Gradient dX = dY (tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)), sp = softplus(x) (oneDNN
// mish backward; PyTorch's mish_backward).
#include "ops/activation/Activation.h"

#include <cmath>

namespace dtc::ops {

OpDef defineMish() {
  return activationDef("Mish", 18, kFloatNoBf16Types, "mish", [](double x, double, double) {
    const double sp = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    return x * std::tanh(sp);
  });
}

} // namespace dtc::ops
