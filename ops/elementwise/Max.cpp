// Max: elementwise maximum of one or more tensors with multidirectional broadcasting (ONNX Max-6
// same-shape, Max-8 broadcasting, Max-12 integer types, Max-13 bfloat16; one canonical form).
// A NaN in any input gives NaN (numpy's np.maximum, ONNX's reference, torch.maximum). Folds.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>
#include <limits>

namespace dtc::ops {

OpDef defineMax() {
  OpDef d = variadicDef("Max", "max", /*integerTypes=*/true);
  d.fold = [](FoldContext &ctx) {
    return foldVariadic(
        ctx, [](int64_t a, int64_t b) -> Expected<int64_t> { return b > a ? b : a; },
        [](double a, double b) {
          if (std::isnan(a) || std::isnan(b))
            return std::numeric_limits<double>::quiet_NaN();
          return b > a ? b : a;
        });
  };
  // The gradient goes to the selected input, split evenly among ties (selectedInputGradient).
  d.gradient = selectedInputGradient;
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
