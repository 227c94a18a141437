// Celu: elementwise max(0, x) + min(0, alpha (e^(x / alpha) - 1)), alpha 1 by default (ONNX
// Celu-12, the first version; f32 only). Folds. Gradient dX = X > 0 ? dY : e^(X / alpha) dY
// (dY at 0 either way; PyTorch's celu).
#include "ops/activation/Activation.h"

#include <algorithm>
#include <cmath>

namespace dtc::ops {

OpDef defineCelu() {
  return activationDef("Celu", 12, bit(ir::DType::kFloat32), "celu",
                       [](double x, double a, double) {
                         return std::max(0.0, x) + std::min(0.0, a * std::expm1(x / a));
                       },
                       {{"alpha", 1.f}});
}

} // namespace dtc::ops
