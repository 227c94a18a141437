// CPU kernels of ai.dtc.MaxPoolGrad and ai.dtc.AveragePoolGrad (1-D to 3-D, row-major): loops
// over N * C planes. The window of output o along an axis starts at o * stride - pad_begin and
// has kernel positions spaced by the dilation; the output sizes follow the forward kernel
// (ops/cpu/Pool.cpp: ceil_mode, with the last window dropped when it starts past the input and
// the begin pad). Positions outside X (pads) never receive gradient.
//  - MaxPoolGrad recomputes each window's argmax from X: the first maximal element in the
//    window's row-major order (a strictly larger value replaces it), and adds dY there.
//  - AveragePoolGrad adds dY / divisor to each element of the window inside X; the divisor is
//    the forward's: count_include_pad=0 counts the elements inside X, count_include_pad=1 the
//    positions inside the explicit pads (not the ceil_mode extension past them).
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <cstring>

namespace dtc::ops::cpu {

namespace {

/// Per axis (padded to 3 axes) and per output index: the kernel positions [jBegin, jEnd) that
/// fall inside X, the first window element's input index (lo), and the include-pad count.
struct PoolAxis {
  int64_t in = 1, out = 1, k = 1, s = 1, d = 1;
  std::vector<int64_t> lo, jBegin, jEnd, padded;
};

struct PoolGradParams {
  int64_t planes = 0; ///< N * C
  PoolAxis axis[3];
  bool includePad = false;
};

/// x: the forward input's shape; y: dY's shape (must match the forward's output).
Expected<PoolGradParams> poolGradParams(const KernelSpec &spec, const std::vector<int64_t> &x,
                                        const std::vector<int64_t> &y) {
  PoolGradParams p;
  if (x.size() < 3 || x.size() > 5 || y.size() != x.size() || x[0] != y[0] || x[1] != y[1])
    return spec.error("X " + shapeStr(x) + " and dY " + shapeStr(y) +
                      " must have one rank in [3, 5] and the same N and C");
  size_t sp = x.size() - 2;
  std::vector<int64_t> kernel = spec.attrInts("kernel_shape");
  std::vector<int64_t> strides = spec.attrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dilations = spec.attrInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = spec.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  int64_t ceilMode = spec.attrInt("ceil_mode", 0);
  int64_t includePad = spec.attrInt("count_include_pad", 0);
  if ((ceilMode != 0 && ceilMode != 1) || (includePad != 0 && includePad != 1))
    return spec.error("ceil_mode and count_include_pad must be 0 or 1");
  p.includePad = includePad == 1;
  if (kernel.size() != sp || strides.size() != sp || dilations.size() != sp ||
      pads.size() != 2 * sp)
    return spec.error("kernel_shape, strides and dilations must have " + std::to_string(sp) +
                      " values and pads " + std::to_string(2 * sp));
  p.planes = x[0] * x[1];
  constexpr int64_t kLimit = 1 << 20;
  for (size_t i = 0; i < sp; ++i) {
    PoolAxis &a = p.axis[i];
    int64_t pb = pads[i], pe = pads[i + sp];
    a.in = x[2 + i];
    a.k = kernel[i];
    a.s = strides[i];
    a.d = dilations[i];
    if (a.in < 1 || a.k < 1 || a.k > kLimit || a.s < 1 || a.s > kLimit || a.d < 1 || a.d > kLimit ||
        pb < 0 || pe < 0 || pb >= a.k || pe >= a.k)
      return spec.error("spatial dims must be positive, kernel_shape, strides, dilations in "
                        "[1, 2^20] and pads in [0, kernel_shape)");
    int64_t eff = a.d * (a.k - 1) + 1, span = a.in + pb + pe - eff;
    if (span < 0)
      return spec.error("the window is larger than the padded input on spatial axis " +
                        std::to_string(i));
    int64_t o = (ceilMode ? (span + a.s - 1) / a.s : span / a.s) + 1;
    if (ceilMode && (o - 1) * a.s >= a.in + pb)
      --o;
    if (o != y[2 + i])
      return spec.error("dY " + shapeStr(y) + " does not match the pooling of X " + shapeStr(x) +
                        " on spatial axis " + std::to_string(i) + " (expected " +
                        std::to_string(o) + ")");
    a.out = o;
    for (int64_t j = 0; j < o; ++j) {
      int64_t lo = j * a.s - pb;
      int64_t jb = lo >= 0 ? 0 : (-lo + a.d - 1) / a.d;
      int64_t je = lo > a.in - 1 ? 0 : std::min(a.k, (a.in - 1 - lo) / a.d + 1);
      int64_t last = std::min(lo + a.d * (a.k - 1), a.in + pe - 1);
      a.lo.push_back(lo);
      a.jBegin.push_back(jb);
      a.jEnd.push_back(std::max(jb, je));
      a.padded.push_back((last - lo) / a.d + 1);
    }
  }
  for (size_t i = sp; i < 3; ++i) { // unit axes
    PoolAxis &a = p.axis[i];
    a.lo = {0};
    a.jBegin = {0};
    a.jEnd = {1};
    a.padded = {1};
  }
  return p;
}

class PoolGradKernel : public Kernel {
public:
  PoolGradKernel(PoolGradParams p, bool max) : p_(std::move(p)), max_(max) {
    const PoolAxis &a0 = p_.axis[0], &a1 = p_.axis[1], &a2 = p_.axis[2];
    for (int64_t j0 = 0; j0 < a0.k; ++j0)
      for (int64_t j1 = 0; j1 < a1.k; ++j1)
        for (int64_t j2 = 0; j2 < a2.k; ++j2)
          offsets_.push_back((j0 * a0.d * a1.in + j1 * a1.d) * a2.in + j2 * a2.d);
    for (int a = 0; a < 3; ++a) {
      const PoolAxis &ax = p_.axis[a];
      for (size_t o = 0; o < ax.jBegin.size(); ++o)
        interior_[a].push_back(ax.jBegin[o] == 0 && ax.jEnd[o] == ax.k);
    }
  }

  Status run(const KernelArgs &args) override {
    const float *dy = static_cast<const float *>(args.inputs[0]);
    const float *x = max_ ? static_cast<const float *>(args.inputs[1]) : nullptr;
    float *dx = static_cast<float *>(args.outputs[0]);
    const PoolAxis &a0 = p_.axis[0], &a1 = p_.axis[1], &a2 = p_.axis[2];
    int64_t inSize = a0.in * a1.in * a2.in, outSize = a0.out * a1.out * a2.out;
    std::memset(dx, 0, static_cast<size_t>(p_.planes * inSize) * sizeof(float));
    const int64_t *offsets = offsets_.data();
    const size_t numOffsets = offsets_.size();
    const float fullDiv = static_cast<float>(numOffsets);
    for (int64_t plane = 0; plane < p_.planes; ++plane) {
      const float *g = dy + plane * outSize;
      float *gx = dx + plane * inSize;
      const float *xp = x ? x + plane * inSize : nullptr;
      for (int64_t o0 = 0; o0 < a0.out; ++o0)
        for (int64_t o1 = 0; o1 < a1.out; ++o1)
          for (int64_t o2 = 0; o2 < a2.out; ++o2, ++g) {
            const size_t u0 = static_cast<size_t>(o0), u1 = static_cast<size_t>(o1),
                         u2 = static_cast<size_t>(o2);
            int64_t l0 = a0.lo[u0], l1 = a1.lo[u1], l2 = a2.lo[u2];
            if (interior_[0][u0] && interior_[1][u1] && interior_[2][u2]) {
              // The whole window lies inside X: fixed offsets from its first element, in
              // row-major window order.
              int64_t base = (l0 * a1.in + l1) * a2.in + l2;
              if (max_) {
                const float *w = xp + base;
                size_t best = 0;
                float bestV = w[offsets[0]];
                for (size_t t = 1; t < numOffsets; ++t)
                  if (w[offsets[t]] > bestV) {
                    bestV = w[offsets[t]];
                    best = t;
                  }
                gx[base + offsets[best]] += *g;
              } else {
                float v = *g / fullDiv;
                float *w = gx + base;
                for (size_t t = 0; t < numOffsets; ++t)
                  w[offsets[t]] += v;
              }
              continue;
            }
            int64_t b0 = a0.jBegin[u0], e0 = a0.jEnd[u0], b1 = a1.jBegin[u1], e1 = a1.jEnd[u1],
                    b2 = a2.jBegin[u2], e2 = a2.jEnd[u2];
            if (b0 >= e0 || b1 >= e1 || b2 >= e2)
              continue; // a window entirely in the pads (not produced by valid attributes)
            if (max_) {
              int64_t best = -1;
              float bestV = 0.f;
              for (int64_t j0 = b0; j0 < e0; ++j0)
                for (int64_t j1 = b1; j1 < e1; ++j1) {
                  int64_t row = ((l0 + j0 * a0.d) * a1.in + l1 + j1 * a1.d) * a2.in + l2;
                  for (int64_t j2 = b2; j2 < e2; ++j2) {
                    int64_t idx = row + j2 * a2.d;
                    float v = xp[idx];
                    if (best < 0 || v > bestV) {
                      best = idx;
                      bestV = v;
                    }
                  }
                }
              gx[best] += *g;
            } else {
              int64_t div = p_.includePad ? a0.padded[u0] * a1.padded[u1] * a2.padded[u2]
                                          : (e0 - b0) * (e1 - b1) * (e2 - b2);
              float v = *g / static_cast<float>(div);
              for (int64_t j0 = b0; j0 < e0; ++j0)
                for (int64_t j1 = b1; j1 < e1; ++j1) {
                  float *row = gx + ((l0 + j0 * a0.d) * a1.in + l1 + j1 * a1.d) * a2.in + l2;
                  for (int64_t j2 = b2; j2 < e2; ++j2)
                    row[j2 * a2.d] += v;
                }
            }
          }
    }
    return Status::ok();
  }

private:
  PoolGradParams p_;
  bool max_;
  std::vector<int64_t> offsets_;  ///< window element offsets from its first element, row-major
  std::vector<char> interior_[3]; ///< per axis and output index: the window is inside X
};

Status checkRowMajorF32(const KernelSpec &spec, size_t inputs) {
  DTC_RETURN_IF_ERROR(checkArity(spec, inputs, inputs, 1));
  for (size_t i = 0; i < inputs; ++i) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
    if (spec.inputs[i].layout != Layout::kRowMajor)
      return spec.error("input " + std::to_string(i) + " must be row-major");
  }
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  if (spec.outputs[0].layout != Layout::kRowMajor)
    return spec.error("output 0 must be row-major");
  return checkShapes(spec);
}

Expected<PoolGradParams> maxParams(const KernelSpec &spec) {
  if (spec.outputs[0].shape != spec.inputs[1].shape)
    return spec.error("output 0 " + shapeStr(spec.outputs[0].shape) + " must have X's shape " +
                      shapeStr(spec.inputs[1].shape));
  return poolGradParams(spec, spec.inputs[1].shape, spec.inputs[0].shape);
}

Expected<PoolGradParams> avgParams(const KernelSpec &spec) {
  std::vector<int64_t> x = spec.attrInts("input_shape");
  if (spec.outputs[0].shape != x)
    return spec.error("input_shape " + shapeStr(x) + " differs from output 0 " +
                      shapeStr(spec.outputs[0].shape));
  return poolGradParams(spec, x, spec.inputs[0].shape);
}

} // namespace

Status checkMaxPoolGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkRowMajorF32(spec, 2));
  return maxParams(spec).status();
}

Expected<KernelPtr> createMaxPoolGrad(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(PoolGradParams p, maxParams(spec));
  return KernelPtr(std::make_unique<PoolGradKernel>(std::move(p), true));
}

Status checkAveragePoolGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkRowMajorF32(spec, 1));
  return avgParams(spec).status();
}

Expected<KernelPtr> createAveragePoolGrad(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(PoolGradParams p, avgParams(spec));
  return KernelPtr(std::make_unique<PoolGradKernel>(std::move(p), false));
}

} // namespace dtc::ops::cpu
