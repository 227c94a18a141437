// Helpers of the CPU index and shape kernels (ops/cpu/Index.cpp): dtype checks for the
// element-moving ops, reading int32/int64 index tensors at run time, ONNX Slice clamping, and
// AxisRemap, a copy of a tensor whose output coordinates map axis by axis to input coordinates
// (the common core of Gather, Slice, Expand, Tile and Pad).
#pragma once

#include "ops/ShapeHelpers.h"
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace dtc::ops::cpu {

/// Data dtypes of the element-moving kernels: they copy elements by size (1, 4 or 8 bytes).
inline const std::vector<ir::DType> &indexDataDTypes() {
  static const std::vector<ir::DType> kTypes = {ir::DType::kFloat32, ir::DType::kInt32,
                                                ir::DType::kInt64, ir::DType::kBool};
  return kTypes;
}

/// Errors unless input (or output) `index` is f32, i32, i64 or bool:
/// "input 0 has dtype f64; the CPU kernel supports f32, i32, i64 or bool".
inline Status checkIndexDataDType(const KernelSpec &spec, bool input, size_t index) {
  return checkDType(spec, input, index, indexDataDTypes());
}

/// Errors unless input `index` is present (when `required`), has one of `allowed` dtypes and is
/// 1-D: "input 1 must be 1-D, got shape [2,2]". An absent optional input is fine.
inline Status checkIndexVector(const KernelSpec &spec, size_t index, bool required,
                               const std::vector<ir::DType> &allowed) {
  if (index >= spec.inputs.size() || !spec.inputs[index].present()) {
    if (!required)
      return Status::ok();
    return spec.error("input " + std::to_string(index) + " is required");
  }
  DTC_RETURN_IF_ERROR(checkDType(spec, true, index, allowed));
  if (spec.inputs[index].shape.size() != 1)
    return spec.error("input " + std::to_string(index) + " must be 1-D, got shape " +
                      shapeStr(spec.inputs[index].shape));
  return Status::ok();
}

/// The `n` elements of an int32 or int64 tensor at `data`, widened to int64 (`data` may be null
/// when n is 0).
inline std::vector<int64_t> readIndexTensor(const void *data, ir::DType dtype, int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n > 0 ? n : 0));
  if (out.empty())
    return out;
  if (dtype == ir::DType::kInt64) {
    std::memcpy(out.data(), data, out.size() * sizeof(int64_t));
  } else {
    std::vector<int32_t> narrow(out.size());
    std::memcpy(narrow.data(), data, narrow.size() * sizeof(int32_t));
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = narrow[i];
  }
  return out;
}

/// Maps `axis` into [0, rank) (negative counts from the end); false when out of range.
inline bool normalizeAxisValue(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

/// A copy from a dense row-major input of shape `inShape` to a dense row-major output of shape
/// `outShape` (same rank) where output element (c0, ..., c{r-1}) is input element
/// (coords(0)[c0], ..., coords(r-1)[c{r-1}]), or the fill value when any coordinate is -1.
/// Trailing axes that map identically are copied as contiguous blocks (memcpy).
class AxisRemap {
public:
  AxisRemap() = default;
  /// `elemSize` in bytes (> 0). Coordinates start as the identity where the dims agree, else 0.
  AxisRemap(std::vector<int64_t> inShape, std::vector<int64_t> outShape, size_t elemSize);

  /// Source coordinates of output axis `a`: outShape[a] entries, each in [0, inShape[a]) or -1
  /// (fill). The caller guarantees the range (the kernels validate run-time values first).
  std::vector<int64_t> &coords(size_t a) { return coords_[a]; }
  /// Sets coords(a) to 0, 1, ..., outShape[a]-1.
  void setIdentity(size_t a);

  /// Copies `in` to `out`. `fill` points at one element (elemSize bytes) or is null (zeros).
  /// `in` may be null when no element is read (an empty input).
  void copy(const void *in, void *out, const void *fill) const;

private:
  std::vector<int64_t> inShape_, outShape_, inStrides_;
  size_t elem_ = 1;
  std::vector<std::vector<int64_t>> coords_;
};

/// The geometry of GatherND (and of its gradient) for data of shape `data` and indices of shape
/// `indices` with `batchDims` leading batch axes: `tuples` index tuples of length `m`, each
/// selecting a `slice` of contiguous elements; tuple t belongs to batch t / groups.
struct GatherNDGeometry {
  int64_t batchDims = 0, m = 0, groups = 1, tuples = 0, slice = 1, batchSize = 1;
  std::vector<int64_t> dataShape;

  /// The expected output shape, or an error naming `spec`'s node.
  static Expected<GatherNDGeometry> make(const KernelSpec &spec, const std::vector<int64_t> &data,
                                         const std::vector<int64_t> &indices, int64_t batchDims,
                                         std::vector<int64_t> &outShape) {
    const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(indices.size());
    if (r < 1 || q < 1 || batchDims < 0 || batchDims >= std::min(r, q))
      return spec.error("data " + shapeStr(data) + " and indices " + shapeStr(indices) +
                        " need rank >= 1 and batch_dims " + std::to_string(batchDims) +
                        " below both ranks");
    GatherNDGeometry g;
    g.batchDims = batchDims;
    g.m = indices.back();
    g.dataShape = data;
    if (g.m < 1 || g.m > r - batchDims)
      return spec.error("the last dim of indices " + shapeStr(indices) + " must be in [1, " +
                        std::to_string(r - batchDims) + "]");
    for (int64_t k = 0; k < batchDims; ++k)
      if (data[static_cast<size_t>(k)] != indices[static_cast<size_t>(k)])
        return spec.error("batch dim " + std::to_string(k) + " differs: data " + shapeStr(data) +
                          ", indices " + shapeStr(indices));
    int64_t batches = 1;
    for (int64_t k = 0; k < batchDims; ++k)
      batches *= data[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(batchDims); k + 1 < indices.size(); ++k)
      g.groups *= indices[k];
    for (size_t k = static_cast<size_t>(batchDims + g.m); k < data.size(); ++k)
      g.slice *= data[k];
    for (size_t k = static_cast<size_t>(batchDims); k < data.size(); ++k)
      g.batchSize *= data[k];
    g.tuples = batches * g.groups;
    outShape.assign(indices.begin(), indices.end() - 1);
    outShape.insert(outShape.end(), data.begin() + batchDims + g.m, data.end());
    return g;
  }

  /// Element offset into data of tuple t (its m indices at `tuple`), or -1 - k when index k is
  /// out of range (`bad` receives it).
  int64_t offset(int64_t t, const int64_t *tuple, int64_t &bad) const {
    int64_t off = (t / groups) * batchSize, stride = batchSize;
    for (int64_t k = 0; k < m; ++k) {
      const int64_t s = dataShape[static_cast<size_t>(batchDims + k)];
      stride /= s;
      const int64_t v = tuple[k];
      if (v < -s || v >= s) {
        bad = v;
        return -1 - k;
      }
      off += (v < 0 ? v + s : v) * stride;
    }
    return off;
  }

  /// "index 5 is out of range for axis 1 of size 3".
  std::string rangeError(int64_t code, int64_t bad) const {
    const int64_t axis = batchDims + (-1 - code);
    return "index " + std::to_string(bad) + " is out of range for axis " + std::to_string(axis) +
           " of size " + std::to_string(dataShape[static_cast<size_t>(axis)]);
  }
};

} // namespace dtc::ops::cpu
