// Coordinate math of Resize shared by its forward kernel and its gradient (ResizeGrad): the
// coordinate transforms of the ONNX operator text (onnx/reference/ops/op_resize.py) and, per
// axis, which input indices (and linear weight) every output index reads. Out-of-range
// neighbours take the edge index.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dtc::ops::cpu {

enum class ResizeTransform {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn
};
enum class ResizeRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

/// Parses coordinate_transformation_mode; false for unknown names and tf_crop_and_resize.
inline bool parseResizeTransform(const std::string &s, ResizeTransform &t) {
  if (s == "half_pixel")
    t = ResizeTransform::kHalfPixel;
  else if (s == "half_pixel_symmetric")
    t = ResizeTransform::kHalfPixelSymmetric;
  else if (s == "pytorch_half_pixel")
    t = ResizeTransform::kPytorchHalfPixel;
  else if (s == "align_corners")
    t = ResizeTransform::kAlignCorners;
  else if (s == "asymmetric")
    t = ResizeTransform::kAsymmetric;
  else if (s == "tf_half_pixel_for_nn")
    t = ResizeTransform::kTfHalfPixelForNn;
  else
    return false;
  return true;
}

/// Parses nearest_mode; false for unknown names.
inline bool parseResizeRounding(const std::string &s, ResizeRounding &r) {
  if (s == "round_prefer_floor")
    r = ResizeRounding::kRoundPreferFloor;
  else if (s == "round_prefer_ceil")
    r = ResizeRounding::kRoundPreferCeil;
  else if (s == "floor")
    r = ResizeRounding::kFloor;
  else if (s == "ceil")
    r = ResizeRounding::kCeil;
  else
    return false;
  return true;
}

/// Source coordinate of output index x along an axis of length inLen resized to outLen with
/// scale s (ONNX Resize coordinate_transformation_mode).
inline double resizeOriginalCoord(ResizeTransform t, int64_t x, int64_t inLen, int64_t outLen,
                                  double s) {
  double xr = static_cast<double>(x);
  switch (t) {
  case ResizeTransform::kHalfPixel:
    return (xr + 0.5) / s - 0.5;
  case ResizeTransform::kHalfPixelSymmetric: {
    double adjustment = static_cast<double>(outLen) / (s * static_cast<double>(inLen));
    double center = static_cast<double>(inLen) / 2;
    return center * (1 - adjustment) + (xr + 0.5) / s - 0.5;
  }
  case ResizeTransform::kPytorchHalfPixel:
    return outLen > 1 ? (xr + 0.5) / s - 0.5 : 0.0;
  case ResizeTransform::kAlignCorners:
    return outLen == 1 ? 0.0
                       : xr * static_cast<double>(inLen - 1) / static_cast<double>(outLen - 1);
  case ResizeTransform::kAsymmetric:
    return xr / s;
  case ResizeTransform::kTfHalfPixelForNn:
    return (xr + 0.5) / s;
  }
  return xr;
}

/// Per output index along one axis: output x = (1 - w[x]) * in[i0[x]] + w[x] * in[i1[x]]
/// (nearest: i0 == i1, w == 0). `identity` when the axis is not resized at all.
struct ResizeAxisMap {
  std::vector<int64_t> i0, i1;
  std::vector<float> w;
  bool identity = true;
};

inline ResizeAxisMap resizeAxisMap(bool linear, ResizeTransform t, ResizeRounding rounding,
                                   int64_t inLen, int64_t outLen, double s) {
  ResizeAxisMap m;
  auto clamp = [&](double v) {
    return v <= 0                                ? int64_t(0)
           : v >= static_cast<double>(inLen - 1) ? inLen - 1
                                                 : static_cast<int64_t>(v);
  };
  for (int64_t x = 0; x < outLen; ++x) {
    double xo = resizeOriginalCoord(t, x, inLen, outLen, s);
    double f = std::floor(xo), r = xo - f;
    int64_t i0, i1;
    float w = 0.0f;
    if (linear) {
      i0 = clamp(f);
      i1 = clamp(f + 1);
      w = static_cast<float>(r);
      if (i0 == i1)
        w = 0.0f;
    } else {
      bool up = false;
      if (r != 0.0) {
        switch (rounding) {
        case ResizeRounding::kRoundPreferFloor:
          up = r > 0.5;
          break;
        case ResizeRounding::kRoundPreferCeil:
          up = r >= 0.5;
          break;
        case ResizeRounding::kFloor:
          up = false;
          break;
        case ResizeRounding::kCeil:
          up = true;
          break;
        }
      }
      i0 = i1 = clamp(up ? f + 1 : f);
    }
    if (i0 != x || w != 0.0f || inLen != outLen)
      m.identity = false;
    m.i0.push_back(i0);
    m.i1.push_back(i1);
    m.w.push_back(w);
  }
  return m;
}

} // namespace dtc::ops::cpu
