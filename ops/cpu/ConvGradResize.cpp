// CPU kernel of ai.dtc.ResizeGrad (row-major f32, any rank): the adjoint of the Resize kernel
// (ops/cpu/Resize.cpp) for modes nearest and linear. The forward is separable (one 1-D pass per
// resized axis, each out[x] = (1 - w) * in[i0] + w * in[i1]), so its adjoint is one 1-D
// scatter-add pass per resized axis, dx[i0] += (1 - w) * dy[x], dx[i1] += w * dy[x], with the
// forward's maps (ops/cpu/ResizeCoords.h). The maps are made once, when the kernel is made.
#include "ops/cpu/OneDnnUtil.h"
#include "ops/cpu/ResizeCoords.h"

#include <cstring>

namespace dtc::ops::cpu {

namespace {

struct ResizeGradParams {
  bool linear = false;
  std::vector<int64_t> in, out; ///< X's and dY's shapes
  std::vector<ResizeAxisMap> maps;
};

Expected<ResizeGradParams> resizeGradParams(const KernelSpec &spec) {
  ResizeGradParams p;
  std::string mode = spec.attrString("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return spec.error("mode '" + mode + "' is not supported (nearest and linear are)");
  p.linear = mode == "linear";
  ResizeTransform t;
  std::string ct = spec.attrString("coordinate_transformation_mode", "half_pixel");
  if (!parseResizeTransform(ct, t))
    return spec.error("coordinate_transformation_mode '" + ct + "' is not supported");
  ResizeRounding r;
  std::string nm = spec.attrString("nearest_mode", "round_prefer_floor");
  if (!parseResizeRounding(nm, r))
    return spec.error("unknown nearest_mode '" + nm + "'");
  p.in = spec.attrInts("input_shape");
  p.out = spec.inputs[0].shape;
  if (p.in != spec.outputs[0].shape || p.in.size() != p.out.size())
    return spec.error("input_shape " + shapeStr(p.in) + " must equal output 0 " +
                      shapeStr(spec.outputs[0].shape) + " and have dY's rank");
  std::vector<float> scales = spec.attrFloats("scales");
  if (!scales.empty() && scales.size() != p.in.size())
    return spec.error("scales must have one value per axis");
  for (size_t d = 0; d < p.in.size(); ++d) {
    if (p.in[d] < 1 || p.out[d] < 1)
      return spec.error("shapes must have no zero dims");
    double s = scales.empty() ? static_cast<double>(p.out[d]) / static_cast<double>(p.in[d])
                              : static_cast<double>(scales[d]);
    if (!(s > 0.0) || !std::isfinite(s))
      return spec.error("scales must be positive and finite");
    p.maps.push_back(resizeAxisMap(p.linear, t, r, p.in[d], p.out[d], s));
  }
  return p;
}

class ResizeGradKernel : public Kernel {
public:
  explicit ResizeGradKernel(ResizeGradParams p) : p_(std::move(p)) {
    // Intermediate shapes: axes are un-resized from the last to the first.
    std::vector<int64_t> shape = p_.out;
    size_t most = 0;
    for (size_t d = p_.in.size(); d-- > 0;) {
      if (p_.maps[d].identity)
        continue;
      todo_.push_back(d);
      shape[d] = p_.in[d];
      size_t n = 1;
      for (int64_t v : shape)
        n *= static_cast<size_t>(v);
      most = std::max(most, n);
    }
    if (todo_.size() > 1) {
      bufA_.resize(most);
      bufB_.resize(most);
    }
  }

  Status run(const KernelArgs &args) override {
    const float *dy = static_cast<const float *>(args.inputs[0]);
    float *dx = static_cast<float *>(args.outputs[0]);
    if (todo_.empty()) {
      size_t n = 1;
      for (int64_t v : p_.in)
        n *= static_cast<size_t>(v);
      std::memmove(dx, dy, n * sizeof(float));
      return Status::ok();
    }
    std::vector<int64_t> shape = p_.out;
    const float *src = dy;
    size_t rank = shape.size();
    for (size_t t = 0; t < todo_.size(); ++t) {
      size_t d = todo_[t];
      float *dst = t + 1 == todo_.size() ? dx : (t % 2 == 0 ? bufA_.data() : bufB_.data());
      int64_t outer = 1, inner = 1, outLen = shape[d], inLen = p_.in[d];
      for (size_t e = 0; e < d; ++e)
        outer *= shape[e];
      for (size_t e = d + 1; e < rank; ++e)
        inner *= shape[e];
      std::memset(dst, 0, static_cast<size_t>(outer * inLen * inner) * sizeof(float));
      const ResizeAxisMap &m = p_.maps[d];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t xo = 0; xo < outLen; ++xo) {
          size_t ux = static_cast<size_t>(xo);
          const float *g = src + (o * outLen + xo) * inner;
          float *a = dst + (o * inLen + m.i0[ux]) * inner;
          float w = m.w[ux], w0 = 1.0f - w;
          if (w == 0.0f) {
            for (int64_t i = 0; i < inner; ++i)
              a[i] += g[i];
          } else {
            float *b = dst + (o * inLen + m.i1[ux]) * inner;
            for (int64_t i = 0; i < inner; ++i) {
              a[i] += w0 * g[i];
              b[i] += w * g[i];
            }
          }
        }
      shape[d] = inLen;
      src = dst;
    }
    return Status::ok();
  }

private:
  ResizeGradParams p_;
  std::vector<size_t> todo_; ///< resized axes, last first
  std::vector<float> bufA_, bufB_;
};

} // namespace

Status checkResizeGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  if (spec.inputs[0].layout != Layout::kRowMajor || spec.outputs[0].layout != Layout::kRowMajor)
    return spec.error("operands must be row-major");
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  return resizeGradParams(spec).status();
}

Expected<KernelPtr> createResizeGrad(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(ResizeGradParams p, resizeGradParams(spec));
  return KernelPtr(std::make_unique<ResizeGradKernel>(std::move(p)));
}

} // namespace dtc::ops::cpu
