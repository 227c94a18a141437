// CPU kernel of Resize (canonical opset-19 form X, roi?, scales?, sizes?): modes nearest (any
// fixed-size dtype, one gather pass) and linear (float32, one 1-D pass per resized axis, which is
// the N-linear interpolation), with the coordinate transforms of the ONNX operator text and its
// reference implementation (onnx/reference/ops/op_resize.py); out-of-range neighbors take the
// edge value. Scales or sizes are read at run time and must give the plan's output shape.
// Input 0 and output 0 share one layout, row-major or channels-last: both passes walk the dims in
// memory order, so in channels-last the innermost loop runs over C contiguous values (nearest
// copies whole runs of unresized trailing dims with one memcpy). Linear resizes of the spatial
// dims with half_pixel (or pytorch_half_pixel to lengths > 1) use oneDNN's linear resampling when
// the run's scales equal out / in (oneDNN maps with exactly (x + 0.5) * in / out - 0.5 and the
// same edge clamping): 5 us instead of 30 (nhwc) or 50 (nchw) for 1x32x16x16 -> 1x32x32x32.
#include "ops/cpu/OneDnnUtil.h"

#include <cmath>
#include <cstring>

namespace dtc::ops::cpu {

namespace {

enum class Transform {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn
};
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

bool inputGiven(const KernelSpec &spec, size_t i) {
  return spec.inputs.size() > i && spec.inputs[i].present() && spec.inputs[i].numElements() > 0;
}

struct ResizeAttrs {
  bool linear = false;
  Transform transform = Transform::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  std::vector<int64_t> axes; ///< resized axes, in the order of scales/sizes
  std::string policy = "stretch";
};

Expected<ResizeAttrs> resizeAttrs(const KernelSpec &spec) {
  ResizeAttrs a;
  std::string mode = spec.attrString("mode", "nearest");
  if (mode == "cubic")
    return spec.error("mode=cubic is not supported by the CPU kernel (nearest and linear are)");
  if (mode != "nearest" && mode != "linear")
    return spec.error("unknown mode '" + mode + "'");
  a.linear = mode == "linear";
  std::string ct = spec.attrString("coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel")
    a.transform = Transform::kHalfPixel;
  else if (ct == "half_pixel_symmetric")
    a.transform = Transform::kHalfPixelSymmetric;
  else if (ct == "pytorch_half_pixel")
    a.transform = Transform::kPytorchHalfPixel;
  else if (ct == "align_corners")
    a.transform = Transform::kAlignCorners;
  else if (ct == "asymmetric")
    a.transform = Transform::kAsymmetric;
  else if (ct == "tf_half_pixel_for_nn")
    a.transform = Transform::kTfHalfPixelForNn;
  else if (ct == "tf_crop_and_resize")
    return spec.error("coordinate_transformation_mode=tf_crop_and_resize is not supported by the "
                      "CPU kernel");
  else
    return spec.error("unknown coordinate_transformation_mode '" + ct + "'");
  std::string nm = spec.attrString("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor")
    a.rounding = Rounding::kRoundPreferFloor;
  else if (nm == "round_prefer_ceil")
    a.rounding = Rounding::kRoundPreferCeil;
  else if (nm == "floor")
    a.rounding = Rounding::kFloor;
  else if (nm == "ceil")
    a.rounding = Rounding::kCeil;
  else
    return spec.error("unknown nearest_mode '" + nm + "'");
  if (spec.attrInt("antialias", 0) != 0)
    return spec.error("antialias=1 is not supported by the CPU kernel");
  if (spec.attrInt("exclude_outside", 0) != 0)
    return spec.error("exclude_outside=1 is not supported by the CPU kernel");
  a.policy = spec.attrString("keep_aspect_ratio_policy", "stretch");
  if (a.policy != "stretch" && a.policy != "not_larger" && a.policy != "not_smaller")
    return spec.error("unknown keep_aspect_ratio_policy '" + a.policy + "'");
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  std::vector<int64_t> axes = spec.attrInts("axes");
  if (!spec.attrs.count("axes"))
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  for (int64_t ax : axes) {
    if (ax < -rank || ax >= rank)
      return spec.error("axes value " + std::to_string(ax) + " is out of range for rank " +
                        std::to_string(rank));
    int64_t n = ax < 0 ? ax + rank : ax;
    if (std::find(a.axes.begin(), a.axes.end(), n) != a.axes.end())
      return spec.error("axes names axis " + std::to_string(n) + " twice");
    a.axes.push_back(n);
  }
  return a;
}

/// Per output index along one axis: the source indices and the weight of the second one.
struct AxisMap {
  std::vector<int64_t> i0, i1;
  std::vector<float> w;
  bool identity = true;
};

/// True when oneDNN's linear resampling computes this Resize whenever scale = out / in on every
/// axis: f32, rank 3 to 5, N and C not resized, half_pixel (pytorch_half_pixel equals it unless
/// an output length is 1).
bool oneDnnLinearFits(const KernelSpec &spec, const ResizeAttrs &a) {
  const auto &in = spec.inputs[0].shape, &out = spec.outputs[0].shape;
  if (!a.linear || in.size() < 3 || in.size() > 5 || in[0] != out[0] || in[1] != out[1])
    return false;
  if (a.transform != Transform::kHalfPixel && a.transform != Transform::kPytorchHalfPixel)
    return false;
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] < 1 || (a.transform == Transform::kPytorchHalfPixel && out[d] < 2))
      return false;
  return true;
}

class ResizeKernel : public Kernel {
public:
  ResizeKernel(const KernelSpec &spec, ResizeAttrs attrs, CpuContext &ctx)
      : where_(spec.where()), ctx_(ctx), a_(std::move(attrs)), in_(spec.inputs[0].shape),
        out_(spec.outputs[0].shape), physIn_(physicalShape(spec.inputs[0])),
        physOut_(physicalShape(spec.outputs[0])),
        elem_(static_cast<size_t>(ir::dtypeSize(spec.inputs[0].dtype))),
        hasScales_(inputGiven(spec, 2)) {
    size_t rank = in_.size();
    logicalOf_.resize(rank);
    for (size_t d = 0; d < rank; ++d)
      logicalOf_[physicalAxis(d, spec.inputs[0].layout, rank)] = d;
    size_t most = 0, n = 1;
    std::vector<int64_t> s = physIn_;
    for (size_t d = 0; d < rank; ++d) { // largest intermediate of the linear passes
      s[d] = physOut_[d];
      n = 1;
      for (int64_t v : s)
        n *= static_cast<size_t>(v);
      most = std::max(most, n);
    }
    if (a_.linear) {
      bufA_.resize(most);
      bufB_.resize(most);
    }
    if (oneDnnLinearFits(spec, a_)) {
      dnnl::memory::desc src = layoutDesc(spec.inputs[0]), dst = layoutDesc(spec.outputs[0]);
      dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference,
                                       dnnl::algorithm::resampling_linear, src, dst);
      dnnl::resampling_forward::primitive_desc pd(d, ctx.engine);
      if (std::string(pd.impl_info_str()).find("ref") == std::string::npos) {
        resampler_ = PrimitiveRunner(dnnl::resampling_forward(pd), ctx);
        resampler_.input(DNNL_ARG_SRC, src, 0);
        resampler_.output(DNNL_ARG_DST, dst, 0);
        useResampler_ = true;
      }
    }
  }

  Status run(const KernelArgs &args) override {
    size_t rank = in_.size(), k = a_.axes.size();
    // Per-axis scale (1 for axes not resized) and the output length it implies.
    std::vector<double> scale(rank, 1.0);
    if (hasScales_) {
      const float *sc = static_cast<const float *>(args.inputs[2]);
      for (size_t i = 0; i < k; ++i) {
        size_t d = static_cast<size_t>(a_.axes[i]);
        if (!(sc[i] > 0.0f) || !std::isfinite(sc[i]))
          return Status::error(where_,
                               "scales must be positive and finite, got " + std::to_string(sc[i]));
        float len = std::floor(static_cast<float>(in_[d]) * sc[i]);
        if (static_cast<double>(len) != static_cast<double>(out_[d]))
          return Status::error(where_, "scale " + std::to_string(sc[i]) + " on axis " +
                                           std::to_string(d) + " gives size " +
                                           std::to_string(len) + "; the plan has " +
                                           std::to_string(out_[d]));
        scale[d] = sc[i];
      }
    } else {
      const int64_t *sz = static_cast<const int64_t *>(args.inputs[3]);
      std::vector<int64_t> want(rank);
      for (size_t d = 0; d < rank; ++d)
        want[d] = in_[d];
      if (a_.policy == "stretch") {
        for (size_t i = 0; i < k; ++i) {
          size_t d = static_cast<size_t>(a_.axes[i]);
          want[d] = sz[i];
          scale[d] = in_[d] ? static_cast<double>(sz[i]) / static_cast<double>(in_[d]) : 1.0;
        }
      } else {
        float s = a_.policy == "not_larger" ? INFINITY : 0.0f;
        for (size_t i = 0; i < k; ++i) {
          size_t d = static_cast<size_t>(a_.axes[i]);
          float r = static_cast<float>(sz[i]) / static_cast<float>(in_[d]);
          s = a_.policy == "not_larger" ? std::min(s, r) : std::max(s, r);
        }
        for (size_t i = 0; i < k; ++i) {
          size_t d = static_cast<size_t>(a_.axes[i]);
          float len = std::round(s * static_cast<float>(in_[d]));
          want[d] = len >= 0.0f && len < 9.2e18f ? static_cast<int64_t>(len) : -1;
          scale[d] = s;
        }
      }
      if (want != out_)
        return Status::error(where_, "sizes give output shape " + shapeStr(want) +
                                         "; the plan has " + shapeStr(out_));
      for (size_t d = 0; d < rank; ++d)
        if (!(scale[d] > 0.0) || !std::isfinite(scale[d]))
          return Status::error(where_,
                               "sizes give a non-positive scale on axis " + std::to_string(d));
    }
    if (useResampler_) {
      bool fits = true;
      for (size_t d = 0; d < rank; ++d)
        fits = fits && scale[d] == static_cast<double>(out_[d]) / static_cast<double>(in_[d]);
      if (fits) {
        try {
          resampler_.execute(args);
          ctx_.stream.wait();
        } catch (const dnnl::error &e) {
          return Status::error(where_, std::string("oneDNN: ") + e.what());
        }
        return Status::ok();
      }
    }
    if (scale != mapScale_) { // the maps depend only on the scales (in memory order of axes)
      maps_.assign(rank, AxisMap());
      for (size_t p = 0; p < rank; ++p) {
        size_t d = logicalOf_[p];
        maps_[p] = axisMap(in_[d], out_[d], scale[d]);
      }
      mapScale_ = scale;
    }
    if (a_.linear)
      runLinear(static_cast<const float *>(args.inputs[0]), static_cast<float *>(args.outputs[0]),
                maps_);
    else
      runNearest(static_cast<const char *>(args.inputs[0]), static_cast<char *>(args.outputs[0]),
                 maps_);
    return Status::ok();
  }

private:
  /// Source coordinate of output index x (ONNX Resize coordinate_transformation_mode).
  double original(int64_t x, int64_t inLen, int64_t outLen, double s) const {
    double xr = static_cast<double>(x);
    switch (a_.transform) {
    case Transform::kHalfPixel:
      return (xr + 0.5) / s - 0.5;
    case Transform::kHalfPixelSymmetric: {
      double adjustment = static_cast<double>(outLen) / (s * static_cast<double>(inLen));
      double center = static_cast<double>(inLen) / 2;
      return center * (1 - adjustment) + (xr + 0.5) / s - 0.5;
    }
    case Transform::kPytorchHalfPixel:
      return outLen > 1 ? (xr + 0.5) / s - 0.5 : 0.0;
    case Transform::kAlignCorners:
      return outLen == 1 ? 0.0
                         : xr * static_cast<double>(inLen - 1) / static_cast<double>(outLen - 1);
    case Transform::kAsymmetric:
      return xr / s;
    case Transform::kTfHalfPixelForNn:
      return (xr + 0.5) / s;
    }
    return xr;
  }

  AxisMap axisMap(int64_t inLen, int64_t outLen, double s) const {
    AxisMap m;
    auto clamp = [&](double v) {
      return v <= 0                                ? int64_t(0)
             : v >= static_cast<double>(inLen - 1) ? inLen - 1
                                                   : static_cast<int64_t>(v);
    };
    for (int64_t x = 0; x < outLen; ++x) {
      double xo = original(x, inLen, outLen, s);
      double f = std::floor(xo), r = xo - f;
      int64_t i0, i1;
      float w = 0.0f;
      if (a_.linear) {
        i0 = clamp(f);
        i1 = clamp(f + 1);
        w = static_cast<float>(r);
        if (i0 == i1)
          w = 0.0f;
      } else {
        bool up = false;
        if (r != 0.0) {
          switch (a_.rounding) {
          case Rounding::kRoundPreferFloor:
            up = r > 0.5;
            break;
          case Rounding::kRoundPreferCeil:
            up = r >= 0.5;
            break;
          case Rounding::kFloor:
            up = false;
            break;
          case Rounding::kCeil:
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

  /// Nearest: an odometer over the leading output dims (memory order); the trailing dims that
  /// are not resized form one contiguous block copied with a memcpy.
  void runNearest(const char *x, char *y, const std::vector<AxisMap> &maps) const {
    size_t rank = physIn_.size();
    if (rank == 0) {
      std::memcpy(y, x, elem_);
      return;
    }
    std::vector<int64_t> inStrides = rowMajorStrides(physIn_);
    size_t lead = rank, block = elem_;
    while (lead > 0 && maps[lead - 1].identity) {
      --lead;
      block *= static_cast<size_t>(physIn_[lead]);
    }
    if (lead == 0) {
      std::memcpy(y, x, block);
      return;
    }
    int64_t total = 1;
    for (size_t d = 0; d < lead; ++d)
      total *= physOut_[d];
    // Odometer over the output; src is the sum of the per-axis source offsets (in elements).
    std::vector<int64_t> idx(lead, 0), part(lead, 0);
    auto offset = [&](size_t d) { return maps[d].i0[static_cast<size_t>(idx[d])] * inStrides[d]; };
    int64_t src = 0;
    for (size_t d = 0; d < lead; ++d) {
      part[d] = offset(d);
      src += part[d];
    }
    for (int64_t o = 0; o < total; ++o) {
      std::memcpy(y + static_cast<size_t>(o) * block, x + static_cast<size_t>(src) * elem_, block);
      for (size_t d = lead; d-- > 0;) {
        src -= part[d];
        if (++idx[d] < physOut_[d]) {
          part[d] = offset(d);
          src += part[d];
          break;
        }
        idx[d] = 0;
        part[d] = offset(d);
        src += part[d];
      }
    }
  }

  void runLinear(const float *x, float *y, const std::vector<AxisMap> &maps) {
    size_t rank = physIn_.size();
    std::vector<size_t> todo;
    for (size_t d = 0; d < rank; ++d)
      if (!maps[d].identity)
        todo.push_back(d);
    if (todo.empty()) {
      std::memcpy(y, x, static_cast<size_t>(ir::checkedProduct(out_).value_or(0)) * sizeof(float));
      return;
    }
    std::vector<int64_t> shape = physIn_;
    const float *src = x;
    for (size_t t = 0; t < todo.size(); ++t) {
      size_t d = todo[t];
      float *dst = t + 1 == todo.size() ? y : (t % 2 == 0 ? bufA_.data() : bufB_.data());
      int64_t outer = 1, inner = 1, len = shape[d], outLen = physOut_[d];
      for (size_t e = 0; e < d; ++e)
        outer *= shape[e];
      for (size_t e = d + 1; e < rank; ++e)
        inner *= shape[e];
      const AxisMap &m = maps[d];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t xo = 0; xo < outLen; ++xo) {
          size_t ux = static_cast<size_t>(xo);
          const float *a = src + (o * len + m.i0[ux]) * inner;
          const float *b = src + (o * len + m.i1[ux]) * inner;
          float w = m.w[ux], w0 = 1.0f - w;
          float *out = dst + (o * outLen + xo) * inner;
          if (inner == 1)
            *out = w0 * *a + w * *b;
          else
            for (int64_t i = 0; i < inner; ++i)
              out[i] = w0 * a[i] + w * b[i];
        }
      shape[d] = outLen;
      src = dst;
    }
  }

  std::string where_;
  CpuContext &ctx_;
  ResizeAttrs a_;
  std::vector<int64_t> in_, out_;         ///< logical shapes
  std::vector<int64_t> physIn_, physOut_; ///< shapes in memory order
  std::vector<size_t> logicalOf_;         ///< memory-order axis -> logical axis
  size_t elem_;
  bool hasScales_;
  std::vector<float> bufA_, bufB_;
  std::vector<double> mapScale_; ///< the scales maps_ was made for (empty: none yet)
  std::vector<AxisMap> maps_;    ///< per memory-order axis
  bool useResampler_ = false;    ///< oneDnnLinearFits and oneDNN has a non-reference kernel
  PrimitiveRunner resampler_;
};

} // namespace

Status checkResize(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 4, 1));
  DTC_ASSIGN_OR_RETURN(ResizeAttrs a, resizeAttrs(spec));
  if (a.linear)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  else if (ir::dtypeSize(spec.inputs[0].dtype) <= 0)
    return spec.error("input 0 has dtype " + std::string(ir::dtypeName(spec.inputs[0].dtype)) +
                      "; the CPU kernel supports fixed-size dtypes for mode=nearest");
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, 0, false, 0));
  bool scales = inputGiven(spec, 2), sizes = inputGiven(spec, 3);
  if (scales == sizes)
    return spec.error("exactly one of scales (input 2) and sizes (input 3) must be given");
  size_t which = scales ? 2 : 3;
  DTC_RETURN_IF_ERROR(
      checkDType(spec, true, which, {scales ? ir::DType::kFloat32 : ir::DType::kInt64}));
  if (spec.inputs[which].shape.size() != 1 ||
      spec.inputs[which].shape[0] != static_cast<int64_t>(a.axes.size()))
    return spec.error(
        std::string(scales ? "scales " : "sizes ") + shapeStr(spec.inputs[which].shape) +
        " must have one value per resized axis (" + std::to_string(a.axes.size()) + ")");
  if (!scales && a.policy != "stretch" && a.axes.empty())
    return spec.error("keep_aspect_ratio_policy needs at least one resized axis");
  const auto &in = spec.inputs[0].shape, &out = spec.outputs[0].shape;
  if (out.size() != in.size())
    return spec.error("output " + shapeStr(out) + " and input " + shapeStr(in) +
                      " have different ranks");
  int64_t outCount = spec.outputs[0].numElements();
  for (size_t d = 0; d < in.size(); ++d) {
    bool resized = std::find(a.axes.begin(), a.axes.end(), static_cast<int64_t>(d)) != a.axes.end();
    if (!resized && out[d] != in[d])
      return spec.error("output " + shapeStr(out) + " differs from input " + shapeStr(in) +
                        " on axis " + std::to_string(d) + ", which is not resized");
    if (in[d] == 0 && outCount > 0)
      return spec.error("input " + shapeStr(in) + " is empty but output " + shapeStr(out) +
                        " is not");
  }
  return Status::ok();
}

Expected<KernelPtr> createResize(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(ResizeAttrs a, resizeAttrs(spec));
  return buildKernel(
      spec, [&]() -> KernelPtr { return std::make_unique<ResizeKernel>(spec, std::move(a), ctx); });
}

} // namespace dtc::ops::cpu
