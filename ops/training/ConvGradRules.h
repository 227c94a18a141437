// Helpers of the gradient rules of Conv, ConvTranspose, MaxPool, AveragePool (ops/nn/): the
// forward's window with auto_pad resolved into explicit pads (shapes are static when autodiff
// runs), as the attribute map the ConvGrad family ops (ConvGradOps.cpp) take.
#pragma once

#include "ops/Gradient.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtc::ops::grad {

/// A forward window with explicit pads ([begin..., end...]).
struct GradWindow {
  std::vector<int64_t> kernel, strides, dilations, pads;
  /// kernel_shape, strides, dilations, pads as attributes.
  std::map<std::string, ir::Attribute> attrs() const;
};

/// The window of a Conv/MaxPool/AveragePool `node` over spatial input sizes `in`, with
/// kernel `kernel` (kernel_shape or W's spatial dims). auto_pad is resolved as ONNX
/// convPoolShapeInference does: VALID -> 0; SAME_UPPER/SAME_LOWER -> out = ceil(in / stride),
/// total = max(0, (out - 1) * stride + dilation * (kernel - 1) + 1 - in), split with the odd
/// element at the end (SAME_UPPER) or the beginning (SAME_LOWER). Errors name the node.
Expected<GradWindow> convPoolWindow(const ir::Node &node, const std::vector<int64_t> &in,
                                    const std::vector<int64_t> &kernel);

/// The static shape of `v`, or an error naming `ctx`'s node.
Expected<std::vector<int64_t>> staticShape(GradientContext &ctx, const ir::Value *v);

/// Sum of `dy` [N, M, D1..Dn] over N and the spatial axes -> [M] (the gradient of a bias).
Expected<ir::Value *> biasGrad(GradientContext &ctx, ir::Value *dy);

} // namespace dtc::ops::grad
