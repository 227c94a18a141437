// Helpers of the Conv/ConvTranspose/pooling gradient rules (see ConvGradRules.h).
#include "ops/training/ConvGradRules.h"

#include "ops/nn/NNCommon.h"

#include <algorithm>

namespace dtc::ops::grad {

std::map<std::string, ir::Attribute> GradWindow::attrs() const {
  return {{"kernel_shape", ir::Attribute(kernel)},
          {"strides", ir::Attribute(strides)},
          {"dilations", ir::Attribute(dilations)},
          {"pads", ir::Attribute(pads)}};
}

Expected<GradWindow> convPoolWindow(const ir::Node &node, const std::vector<int64_t> &in,
                                    const std::vector<int64_t> &kernel) {
  size_t spatial = in.size();
  DTC_ASSIGN_OR_RETURN(nn::Window w, nn::readWindow(node, spatial, kernel));
  GradWindow g{w.kernel, w.strides, w.dilations, w.pads};
  if (w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < spatial; ++i) {
      int64_t s = w.strides[i], out = (in[i] + s - 1) / s;
      int64_t eff = w.dilations[i] * (w.kernel[i] - 1) + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in[i]);
      int64_t small = total / 2, large = total - small;
      g.pads[i] = w.autoPad == "SAME_UPPER" ? small : large;
      g.pads[i + spatial] = total - g.pads[i];
    }
  }
  return g;
}

Expected<std::vector<int64_t>> staticShape(GradientContext &ctx, const ir::Value *v) {
  if (!v->shape().isStatic())
    return ctx.error("gradient: '" + v->name() + "' has shape " + v->shape().str() +
                     "; the rule needs static shapes");
  return v->shape().staticSizes();
}

Expected<ir::Value *> biasGrad(GradientContext &ctx, ir::Value *dy) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, staticShape(ctx, dy));
  std::vector<int64_t> axes = {0};
  for (size_t i = 2; i < shape.size(); ++i)
    axes.push_back(static_cast<int64_t>(i));
  return ctx.emit1("ReduceSum", {dy, ctx.constantI64s(axes)},
                   {{"keepdims", ir::Attribute(int64_t{0})},
                    {"noop_with_empty_axes", ir::Attribute(int64_t{0})}});
}

} // namespace dtc::ops::grad
