// Helpers shared by the nn operator definitions: string-attribute validation, the window
// attributes of Conv/ConvTranspose/pooling (auto_pad, pads, strides, dilations, kernel_shape)
// and the output length of a sliding window along one spatial axis, symbolic sizes included.
#pragma once

#include "ops/OpDef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::ops::nn {

/// Error naming the node unless the string attribute `name` (when present) is one of `allowed`.
Status checkStringAttr(const ir::Node &node, const std::string &name,
                       const std::vector<std::string> &allowed);

/// Window attributes of a Conv/ConvTranspose/pooling node, resolved for `spatial` axes.
struct Window {
  std::string autoPad = "NOTSET"; ///< NOTSET, SAME_UPPER, SAME_LOWER or VALID
  std::vector<int64_t> kernel;    ///< one per spatial axis
  std::vector<int64_t> strides;   ///< default 1
  std::vector<int64_t> dilations; ///< default 1
  std::vector<int64_t> pads;      ///< begin values then end values; default 0
};

/// Reads auto_pad, strides, dilations and pads of `node` for `spatial` axes and checks their
/// lengths and signs (strides/dilations >= 1, pads >= 0). `kernel` (one per spatial axis) is
/// taken as given. Errors name the node and the attribute.
Expected<Window> readWindow(const ir::Node &node, size_t spatial, std::vector<int64_t> kernel);

/// Output length of Conv/pooling along spatial axis `i` of `w` (ONNX convPoolShapeInference):
///  - SAME_UPPER/SAME_LOWER: ceil(in / stride);
///  - VALID: pads taken as 0; NOTSET: explicit pads; then slidingWindowDim (ShapeHelpers.h,
///    with the corrected ceil_mode rule).
/// A symbolic `in` stays exact when the result is an exact multiple of it (stride 1 with
/// "same" padding, SAME with stride 1); otherwise it is unknown.
Expected<ir::Dim> windowOutputDim(const ir::Dim &in, const Window &w, size_t i, bool ceilMode,
                                  const std::string &where);

/// `a * in + b` for a static or symbolic `in` (symbolic only when b == 0); unknown otherwise.
ir::Dim affineDim(const ir::Dim &in, int64_t a, int64_t b);

/// Replaces `old` by a new node of `opType` with `inputs`, `old`'s outputs (their names, types
/// and uses) and `attrs`; the new node keeps `old`'s name. `old` is erased. Returns the new
/// node.
ir::Node *replaceNode(ir::Graph &g, ir::Node *old, const std::string &opType,
                      const std::vector<ir::Value *> &inputs,
                      const std::map<std::string, ir::Attribute> &attrs);

/// True when `v` is known to hold zero elements (an initializer with no elements, or a value of
/// static shape with a zero dim). ONNX treats such roi/scales inputs of Resize as absent.
bool isEmptyTensor(const ir::Value *v);

/// Drops trailing omitted (nullptr) inputs of `node`.
void dropTrailingOmittedInputs(ir::Node &node);

/// Cost of a pooling window op (MaxPool, AveragePool and their ai.dtc gradients): prod of the
/// kernel_shape attribute per element of input/output `windows` (the tensor with one element
/// per window: Y forward, dY backward), plus `extraPerWindow` each. A window of k elements
/// takes k - 1 comparisons (max) or k - 1 adds and a divide (average): counted as k.
CostFn poolCost(bool windowsFromInput, double extraPerWindow);
/// Rows of a layer normalization of input `input` (the product of its dims before the `axis`
/// attribute, default -1: each row is normalized on its own). Errors: an axis out of range.
Expected<double> layerNormRows(const CostContext &ctx, size_t input);

/// FLOPs of training-mode batch normalization of `elements` values over `channels` channels
/// (ONNX BatchNormalization-15 training_mode=1, ai.dtc.BatchNormTraining; Ioffe & Szegedy 2015,
/// algorithm 1), counting the formula's operations: per element 1 for the mean, 3 for the
/// variance (subtract, square, add) and 4 to normalize (subtract, divide, scale, shift); per
/// channel 2 divides (mean, variance), 2 for sqrt(var + epsilon), and 3 for each running
/// statistic written (`runningOutputs`: input * momentum + stat * (1 - momentum)).
double batchNormTrainingFlops(double elements, double channels, int runningOutputs);

/// FLOPs of Resize and Upsample from X dims `in` to Y dims `out`, and of their adjoint
/// ResizeGrad (`adjoint`; `in` = dX dims, `out` = dY dims): "nearest" is a gather (0 FLOPs; the
/// adjoint adds each dY element once); "linear" reads 2 taps per resized axis and "cubic" 4,
/// with a multiply-add per tap: 2 * taps FLOPs per element of Y (or dY). An axis counts as
/// resized when its sizes differ.
double resizeFlops(const std::string &mode, const std::vector<int64_t> &in,
                   const std::vector<int64_t> &out, bool adjoint);

} // namespace dtc::ops::nn

namespace dtc::ops::nn {

/// Shape inference of MaxPool/AveragePool: X [N, C, D1..Dn] (rank >= 3), kernel_shape required
/// (n values), pads smaller than the kernel (as onnxruntime requires), ceil_mode honoured.
/// Sets output 0 and, when present, output 1 (MaxPool Indices) to [N, C, O1..On].
Status inferPool(InferenceContext &ctx);

} // namespace dtc::ops::nn

namespace dtc::ops::nn {

/// Resize/Upsample output length from a scale (ONNX resizeShapeInferenceHelper):
/// floor(float(in) * scale) for a static `in`; a symbolic `in` stays exact for integer scales
/// (k * in); unknown otherwise.
ir::Dim scaledDim(const ir::Dim &in, float scale);

} // namespace dtc::ops::nn
