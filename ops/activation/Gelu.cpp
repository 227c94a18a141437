// Gelu: x * Phi(x) (approximate = "none", the default) or its tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate = "tanh"). ONNX Gelu-20 is the
// first version: the op does not exist before opset 20 (exporters emit Erf/Tanh patterns).
#include "ops/activation/Activation.h"
#include "ops/elementwise/Elementwise.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineGelu() {
  OpDef d;
  d.name = "Gelu";
  d.version(20)
      .in("X", "T")
      .out("Y", "T")
      .attr("approximate", ir::AttrKind::kString)
      .type("T", kFloatTypes);
  d.infer = [](InferenceContext &ctx) -> Status {
    std::string approximate = ctx.node().attrString("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return ctx.error("attribute 'approximate' must be \"none\" or \"tanh\", got \"" +
                       approximate + "\"");
    return inferSameShape(ctx);
  };
  // dX = dY * (Phi(X) + X * phi(X)) for approximate = "none"; the derivative of the tanh form
  // for "tanh" (both as PyTorch's gelu_backward; oneDNN gelu_erf / gelu_tanh backward).
  d.gradient = [](GradientContext &ctx) {
    const bool tanh = ctx.node().attrString("approximate", "none") == "tanh";
    return eltwiseGradRule(ctx, tanh ? "gelu_tanh" : "gelu_erf", false);
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
