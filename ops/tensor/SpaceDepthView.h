// DepthToSpace and SpaceToDepth as one permutation of a 6-D view (ONNX DepthToSpace-13 and
// SpaceToDepth-13 operator text): the input (N, C, H, W) is read as six dims, transposed, and the
// result is the output's bytes. Header-only: the definitions (folding, gradients) and the CPU
// kernels use the same views.
#pragma once

#include <cstdint>
#include <vector>

namespace dtc::ops {

struct SpaceDepthView {
  std::vector<int64_t> dims; ///< the input's 6-D view
  std::vector<int64_t> perm; ///< Transpose perm taking the view to the output's 6-D view
};

/// DepthToSpace of (n, c, h, w) with block b: DCR reads (n, b, b, c/b^2, h, w) and permutes
/// [0, 3, 4, 1, 5, 2]; CRD reads (n, c/b^2, b, b, h, w) and permutes [0, 1, 4, 2, 5, 3]. Either
/// way the output is (n, c/b^2, h*b, w*b). c must be a multiple of b^2 (checked by the callers).
inline SpaceDepthView depthToSpaceView(int64_t n, int64_t c, int64_t h, int64_t w, int64_t b,
                                       bool crd) {
  const int64_t cb = c / (b * b);
  if (crd)
    return {{n, cb, b, b, h, w}, {0, 1, 4, 2, 5, 3}};
  return {{n, b, b, cb, h, w}, {0, 3, 4, 1, 5, 2}};
}

/// SpaceToDepth of (n, c, h, w) with block b: reads (n, c, h/b, b, w/b, b) and permutes
/// [0, 3, 5, 1, 2, 4], giving (n, c*b^2, h/b, w/b): the inverse of DCR DepthToSpace. h and w must
/// be multiples of b (checked by the callers).
inline SpaceDepthView spaceToDepthView(int64_t n, int64_t c, int64_t h, int64_t w, int64_t b) {
  return {{n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}};
}

} // namespace dtc::ops
