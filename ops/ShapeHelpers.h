// Shape arithmetic shared by operator definitions: ONNX multidirectional broadcasting, axis
// normalization, and the output size of convolution/pooling windows.
#pragma once

#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"

#include <algorithm>
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

/// One axis of an ONNX slice: the first index taken and the number of elements.
struct SliceRange {
  int64_t start = 0;
  int64_t count = 0;
};

/// ONNX Slice-13 clamping for an axis of size `dim` (>= 0) and a non-zero `step`: negative
/// start/end count from the end; for step > 0 both clamp to [0, dim]; for step < 0 start clamps
/// to [0, dim-1] and end to [-1, dim-1]. So INT64_MAX / INT64_MIN ends mean "to the end".
/// Header-only: constant folding and the CPU Slice kernel use this one rule.
inline SliceRange clampSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  SliceRange r;
  if (step > 0) {
    start = std::min(std::max<int64_t>(start, 0), dim);
    end = std::min(std::max<int64_t>(end, 0), dim);
    r.start = start;
    r.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::min(std::max<int64_t>(start, 0), dim - 1);
    end = std::min(std::max<int64_t>(end, -1), dim - 1);
    r.start = start;
    uint64_t s = step == INT64_MIN ? uint64_t{1} << 63 : static_cast<uint64_t>(-step);
    r.count =
        start > end ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / s) + 1 : 0;
  }
  return r;
}

/// ONNX Pad: the source index along an axis of size `dim` for padded coordinate `x` (relative
/// to the first input element), or -1 for the padding value. Modes "constant", "edge", "wrap"
/// and "reflect" (the edge element is not repeated). Header-only: folding and the CPU kernel
/// use this one rule.
inline int64_t padSourceIndex(int64_t x, int64_t dim, const std::string &mode) {
  if (x >= 0 && x < dim)
    return x;
  if (mode == "constant" || dim == 0)
    return -1;
  if (mode == "edge")
    return x < 0 ? 0 : dim - 1;
  if (mode == "wrap")
    return ((x % dim) + dim) % dim;
  if (dim == 1)
    return 0;
  int64_t period = 2 * (dim - 1);
  int64_t m = ((x % period) + period) % period;
  return m < dim ? m : period - m;
}

} // namespace dtc::ops
