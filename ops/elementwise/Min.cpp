// Min: elementwise minimum of one or more tensors with multidirectional broadcasting (ONNX Min-6
// same-shape, Min-8 broadcasting, Min-12 integer types, Min-13 bfloat16; one canonical form).
// A NaN in any input gives NaN (numpy's np.minimum, ONNX's reference, torch.minimum). Folds.
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

#include <cmath>
#include <limits>

namespace dtc::ops {

OpDef defineMin() {
  OpDef d = variadicDef("Min", "min", /*integerTypes=*/true);
  d.fold = [](FoldContext &ctx) {
    return foldVariadic(
        ctx, [](int64_t a, int64_t b) -> Expected<int64_t> { return b < a ? b : a; },
        [](double a, double b) {
          if (std::isnan(a) || std::isnan(b))
            return std::numeric_limits<double>::quiet_NaN();
          return b < a ? b : a;
        });
  };
  // The gradient goes to the selected input, split evenly among ties (selectedInputGradient).
  d.gradient = selectedInputGradient;
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
