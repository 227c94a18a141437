// Broadcasting, axes and sliding windows.
#include "ops/ShapeHelpers.h"

#include <algorithm>
#include <limits>

namespace dtc::ops {

Expected<ir::Shape> broadcastShapes(const std::vector<ir::Shape> &shapes,
                                    const std::string &where) {
  size_t rank = 0;
  for (const ir::Shape &s : shapes) {
    if (!s.hasRank())
      return ir::Shape::unknownRank();
    rank = std::max(rank, s.rank());
  }
  std::vector<ir::Dim> out(rank, ir::Dim::fixed(1));
  for (const ir::Shape &s : shapes) {
    size_t offset = rank - s.rank();
    for (size_t i = 0; i < s.rank(); ++i) {
      ir::Dim &o = out[offset + i];
      const ir::Dim &d = s[i];
      if (d.isStatic() && d.value() == 1)
        continue;
      if (o.isStatic() && o.value() == 1) {
        o = d;
        continue;
      }
      if (o == d)
        continue;
      if (o.isStatic() && d.isStatic())
        return Status::error(where, "shapes cannot be broadcast: dimension " +
                                        std::to_string(offset + i) + " is " + o.str() +
                                        " in one input and " + d.str() + " in another");
      if (d.isStatic()) // symbolic/unknown vs static k > 1 -> k
        o = d;
      else if (!o.isStatic())
        o = ir::Dim::unknown();
    }
  }
  return ir::Shape(std::move(out));
}

Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank, const std::string &where,
                                const std::string &what) {
  if (axis < -rank || axis >= rank)
    return Status::error(where, what + " " + std::to_string(axis) + " is out of range for rank " +
                                    std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Expected<ir::Dim> slidingWindowDim(const ir::Dim &in, int64_t kernel, int64_t stride,
                                   int64_t padBegin, int64_t padEnd, int64_t dilation,
                                   bool ceilMode, const std::string &where) {
  if (stride <= 0 || dilation <= 0 || kernel <= 0)
    return Status::error(where, "kernel, stride and dilation must be positive");
  if (padBegin < 0 || padEnd < 0)
    return Status::error(where, "pads must be non-negative");
  if (!in.isStatic())
    return ir::Dim::unknown();
  // 128-bit arithmetic: attribute values come from the model and may be near INT64_MAX.
  using Wide = __int128;
  constexpr Wide kMax = std::numeric_limits<int64_t>::max();
  Wide effective = Wide(dilation) * (kernel - 1) + 1;
  Wide padded = Wide(in.value()) + padBegin + padEnd;
  if (effective > kMax || padded > kMax)
    return Status::error(where, "window (kernel " + std::to_string(kernel) + ", dilation " +
                                    std::to_string(dilation) + ") or padded input (size " +
                                    std::to_string(in.value()) + ", pads " +
                                    std::to_string(padBegin) + " and " + std::to_string(padEnd) +
                                    ") is larger than int64");
  Wide span = padded - effective;
  if (span < 0)
    return Status::error(where, "window of size " + std::to_string(int64_t(effective)) +
                                    " is larger than the padded input " +
                                    std::to_string(int64_t(padded)));
  Wide out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= Wide(in.value()) + padBegin)
    --out; // the last window would start in the right padding only
  return ir::Dim::fixed(static_cast<int64_t>(out));
}

} // namespace dtc::ops
