// Numpy (ONNX multidirectional) broadcasting for the CPU kernels' hand-written loops: the
// broadcast shape of N operands, each operand's element strides read as the output's shape,
// and a loop that visits every output element once, in increasing (row-major) order.
// Used by Pow, the comparisons and Where (Unary.cpp, Compare.cpp); also a layout check of flat
// elementwise kernels.
#pragma once

#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace dtc::ops::cpu {

/// The numpy broadcast of all `shapes` into `out` (rank = the largest rank; each dim equal
/// across operands or 1). False when two operands have different dims > 1 on one axis.
inline bool broadcastAll(const std::vector<std::vector<int64_t>> &shapes,
                         std::vector<int64_t> &out) {
  out.clear();
  for (const std::vector<int64_t> &s : shapes) {
    std::vector<int64_t> next;
    if (!broadcastShapes(out, s, next))
      return false;
    out = std::move(next);
  }
  return true;
}

/// Element strides of a row-major operand of shape `in` read as a tensor of shape `out`:
/// `out.size()` entries (at least one), 0 along broadcast (size-1 or missing leading) dims.
/// `in` must broadcast to `out` (see broadcastAll).
inline std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                             const std::vector<int64_t> &out) {
  size_t rank = std::max<size_t>(out.size(), 1);
  std::vector<int64_t> padded(rank - std::min(rank, in.size()), 1);
  padded.insert(padded.end(), in.begin(), in.end());
  std::vector<int64_t> strides = rowMajorStrides(padded);
  for (size_t i = 0; i < padded.size(); ++i)
    if (padded[i] == 1)
      strides[i] = 0;
  return strides;
}

/// For flat elementwise kernels (same shape in and out): errors unless input 0 and output 0
/// have one layout, so that element i of the input maps to element i of the output.
inline Status checkFlatLayout(const KernelSpec &spec) {
  const TensorDesc &in = spec.inputs.at(0), &out = spec.outputs.at(0);
  if (in.layout != out.layout)
    return spec.error(std::string("input 0 is ") + layoutName(in.layout) + " but output 0 is " +
                      layoutName(out.layout) + "; the CPU kernel needs one layout");
  return Status::ok();
}

/// A broadcast loop over an output of shape `out` with N row-major operands of shapes `ins`
/// (each broadcastable to `out`; checked by the kernel's check function).
template <size_t N> class BroadcastLoop {
public:
  BroadcastLoop() = default;
  BroadcastLoop(const std::vector<int64_t> &out, const std::array<std::vector<int64_t>, N> &ins)
      : shape_(out.empty() ? std::vector<int64_t>{1} : out) {
    for (size_t k = 0; k < N; ++k)
      strides_[k] = broadcastStrides(ins[k], shape_);
  }

  /// Calls fn(o, idx) for every output element o = 0, 1, ... in order, where idx[k] is the
  /// element index of operand k that broadcasts to o. Because o increases and an operand of
  /// the output's shape has idx[k] == o, a loop that reads its operands at idx before writing
  /// element o is correct in place on such an operand. Stops early and returns false when fn
  /// returns false (fn may also return void).
  template <typename Fn> bool run(Fn &&fn) const {
    const size_t rank = shape_.size();
    for (int64_t d : shape_)
      if (d == 0)
        return true;
    const int64_t inner = shape_.back();
    int64_t outer = 1;
    for (size_t d = 0; d + 1 < rank; ++d)
      outer *= shape_[d];
    std::vector<int64_t> pos(rank, 0);
    std::array<int64_t, N> base{}, step{}, idx{};
    for (size_t k = 0; k < N; ++k)
      step[k] = strides_[k].back();
    int64_t o = 0;
    for (int64_t r = 0; r < outer; ++r) {
      for (size_t k = 0; k < N; ++k) {
        base[k] = 0;
        for (size_t d = 0; d + 1 < rank; ++d)
          base[k] += pos[d] * strides_[k][d];
      }
      for (int64_t j = 0; j < inner; ++j, ++o) {
        for (size_t k = 0; k < N; ++k)
          idx[k] = base[k] + j * step[k];
        if constexpr (std::is_same_v<decltype(fn(o, idx)), bool>) {
          if (!fn(o, idx))
            return false;
        } else {
          fn(o, idx);
        }
      }
      for (size_t d = rank - 1; d-- > 0;) {
        if (++pos[d] < shape_[d])
          break;
        pos[d] = 0;
      }
    }
    return true;
  }

private:
  std::vector<int64_t> shape_;
  std::array<std::vector<int64_t>, N> strides_;
};

} // namespace dtc::ops::cpu
