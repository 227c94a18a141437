// The order of TopK's results (ops/reduction/TopK.cpp), shared by constant folding and the CPU
// kernel (ops/cpu/TopK.cpp): per row along the axis, the k largest (or smallest) values, equal
// values by ascending index; NaN counts as larger than every number. Header-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

namespace dtc::ops::topk {

/// Positions of the top k of `v[0..n)` (stride `step`), in the spec's order.
template <typename T>
inline std::vector<int64_t> topPositions(const T *v, int64_t n, int64_t step, int64_t k,
                                         bool largest) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  auto greater = [](T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      return (std::isnan(a) && !std::isnan(b)) || a > b;
    else
      return a > b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t i, int64_t j) {
    const T a = v[i * step], b = v[j * step];
    if (largest ? greater(a, b) : greater(b, a))
      return true;
    if (largest ? greater(b, a) : greater(a, b))
      return false;
    return i < j;
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

/// Values and indices (dims with dims[axis] = k, row-major) of the top k of x (dims) along axis.
template <typename T>
inline void topK(const T *x, const std::vector<int64_t> &dims, int64_t axis, int64_t k,
                 bool largest, T *values, int64_t *indices) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (static_cast<int64_t>(d) < axis)
      outer *= dims[d];
    else if (static_cast<int64_t>(d) > axis)
      inner *= dims[d];
  const int64_t n = dims[static_cast<size_t>(axis)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T *row = x + o * n * inner + i;
      std::vector<int64_t> top = topPositions(row, n, inner, k, largest);
      for (int64_t j = 0; j < k; ++j) {
        const size_t at = static_cast<size_t>((o * k + j) * inner + i);
        values[at] = row[top[static_cast<size_t>(j)] * inner];
        indices[at] = top[static_cast<size_t>(j)];
      }
    }
}

} // namespace dtc::ops::topk
