// Shape arithmetic shared by operator definitions: ONNX multidirectional broadcasting, axis
// normalization, and the output size of convolution/pooling windows.
#pragma once

#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtc::ops {

/// ONNX multidirectional (numpy) broadcasting (onnx/docs/Broadcasting.md). Symbolic dims
/// broadcast against 1 and against equal dims; a symbolic dim against a static size k > 1 gives
/// k. Errors (with `where`) on static sizes that differ and are not 1. Unknown rank -> unknown.
Expected<ir::Shape> broadcastShapes(const std::vector<ir::Shape> &shapes, const std::string &where);

/// Maps axis in [-rank, rank) to [0, rank); error naming `where` and `what` otherwise.
Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, const std::string &where,
                                const std::string &what = "axis");

/// Output length of a sliding window (Conv, pooling) along one axis:
///   floor_or_ceil((in + padBegin + padEnd - dilation*(kernel-1) - 1) / stride) + 1
/// With ceilMode, a last window that would start past the end of the input (left padding
/// included) is dropped (the corrected rule, PyTorch >= 1.x and ONNX opset 19 reference).
/// Unknown/symbolic `in` gives Dim::unknown(). Error when the result is < 1 or stride <= 0.
Expected<ir::Dim> slidingWindowDim(const ir::Dim &in, int64_t kernel, int64_t stride,
                                   int64_t padBegin, int64_t padEnd, int64_t dilation,
                                   bool ceilMode, const std::string &where);

} // namespace dtc::ops
