// CUDA kernels of the data-dependent gathers and scatters: Gather, GatherElements and GatherND
// (indices read on the device; negative ones count from the end; an index out of range writes 0
// and records an error site, reported at the device's next synchronization), ai.dtc.GatherGrad,
// ai.dtc.GatherElementsGrad and ai.dtc.GatherNDGrad (zero fill, then scatter-add with atomicAdd:
// repeated indices accumulate in no fixed order, so f32 sums may differ from the CPU's in the
// last bits from run to run), ScatterElements and ScatterND (a copy of data, then each update
// combined by `reduction` with a compare-and-swap loop; with reduction none and repeated indices
// one update wins, as ONNX leaves it undefined), Resize (nearest and linear; the scales or sizes
// input is read on the device by the first thread of every block with the CPU kernel's rules, a
// mismatch with the plan's output shape is an error site) and ai.dtc.ResizeGrad (the adjoint:
// each dY element scatter-adds its weighted corners). Coordinates come from
// ops/cuda/DataUtil.cuh's resizeTap, compiled here without FMA contraction (data.cmake) so that
// they match the CPU's bit for bit.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DataUtil.cuh"

#include <type_traits>

namespace dtc::ops::cuda {

namespace {

// ---- Gather, GatherGrad ------------------------------------------------------------------------

/// The geometry of a Gather along `axis`: data (outer, dim, inner), indices nIdx entries.
struct GatherShape {
  int64_t nIdx = 0, dim = 0, inner = 1;
  int *slot = nullptr;
  int site = 0;
};

/// out[o, j, k] = in[o, idx[j], k].
template <typename T, typename I>
__global__ void gatherKernel(const T *__restrict__ in, const I *__restrict__ idx,
                             T *__restrict__ out, int64_t total, GatherShape g) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    const int64_t k = e % g.inner, t = e / g.inner, j = t % g.nIdx, o = t / g.nIdx;
    int64_t v = static_cast<int64_t>(idx[j]);
    if (v < 0)
      v += g.dim;
    if (v < 0 || v >= g.dim) {
      reportError(g.slot, g.site);
      out[e] = T(0);
      continue;
    }
    out[e] = in[(o * g.dim + v) * g.inner + k];
  }
}

/// dx[o, idx[j], k] += dy[o, j, k] (dx zeroed before).
template <typename I>
__global__ void gatherGradKernel(const float *__restrict__ dy, const I *__restrict__ idx,
                                 float *__restrict__ dx, int64_t total, GatherShape g) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    const int64_t k = e % g.inner, t = e / g.inner, j = t % g.nIdx, o = t / g.nIdx;
    int64_t v = static_cast<int64_t>(idx[j]);
    if (v < 0)
      v += g.dim;
    if (v < 0 || v >= g.dim) {
      reportError(g.slot, g.site);
      continue;
    }
    atomicAdd(dx + (o * g.dim + v) * g.inner + k, dy[e]);
  }
}

/// GatherElements: out[c] = in[c with axis coordinate idx[c]]; `m` maps the dense index
/// coordinates to data offsets with stride 0 on the axis, `axisStride` is the axis's data stride.
template <typename T, typename I>
__global__ void gatherElementsKernel(const T *__restrict__ in, const I *__restrict__ idx,
                                     T *__restrict__ out, int64_t total, StridedMap m,
                                     int64_t axisStride, GatherShape g) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    int64_t v = static_cast<int64_t>(idx[e]);
    if (v < 0)
      v += g.dim;
    if (v < 0 || v >= g.dim) {
      reportError(g.slot, g.site);
      out[e] = T(0);
      continue;
    }
    out[e] = in[stridedOffset(m, e) + v * axisStride];
  }
}

/// GatherElementsGrad: dx[c with axis coordinate idx[c]] += dy[c] (dx zeroed before).
template <typename I>
__global__ void gatherElementsGradKernel(const float *__restrict__ dy, const I *__restrict__ idx,
                                         float *__restrict__ dx, int64_t total, StridedMap m,
                                         int64_t axisStride, GatherShape g) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    int64_t v = static_cast<int64_t>(idx[e]);
    if (v < 0)
      v += g.dim;
    if (v < 0 || v >= g.dim) {
      reportError(g.slot, g.site);
      continue;
    }
    atomicAdd(dx + stridedOffset(m, e) + v * axisStride, dy[e]);
  }
}

template <typename Fn> Status withElementSize(int64_t size, Fn &&fn) {
  switch (size) {
  case 1:
    return fn(uint8_t{});
  case 2:
    return fn(uint16_t{});
  case 4:
    return fn(uint32_t{});
  default:
    return fn(uint64_t{});
  }
}

template <typename Fn> Status withIndexType(ir::DType t, Fn &&fn) {
  if (t == ir::DType::kInt64)
    return fn(int64_t{});
  return fn(int32_t{});
}

int64_t normalizedAxis(const KernelSpec &spec, size_t rank) {
  const int64_t axis = spec.attrInt("axis", 0);
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

std::string rangeMessage(const KernelSpec &spec, int64_t axis, int64_t dim) {
  return spec.where() + ": an index is out of range for axis " + std::to_string(axis) +
         " of size " + std::to_string(dim);
}

/// Gather (grad = false: data -> out) or GatherGrad (grad = true: dy -> zeroed dx, atomics).
class GatherKernel : public Kernel {
public:
  GatherKernel(const KernelSpec &spec, CudaContext &ctx, bool grad)
      : where_(spec.where()), ctx_(ctx), grad_(grad), indexType_(spec.inputs[1].dtype),
        elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        total_(grad ? spec.inputs[0].numElements() : spec.outputs[0].numElements()),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {
    const std::vector<int64_t> &data = grad ? spec.outputs[0].shape : spec.inputs[0].shape;
    const int64_t axis = normalizedAxis(spec, data.size());
    for (size_t a = static_cast<size_t>(axis) + 1; a < data.size(); ++a)
      g_.inner *= data[a];
    g_.dim = data[static_cast<size_t>(axis)];
    g_.nIdx = spec.inputs[1].numElements();
    g_.slot = ctx.errorSlot();
    g_.site = ctx.addErrorSite(rangeMessage(spec, axis, g_.dim));
  }
  Status run(const KernelArgs &args) override {
    if (grad_)
      DTC_CUDA_RETURN_IF_ERROR(where_,
                               cudaMemsetAsync(args.outputs[0], 0, outBytes_, ctx_.stream()));
    if (total_ == 0)
      return Status::ok();
    return withIndexType(indexType_, [&](auto itag) {
      using I = decltype(itag);
      const I *idx = static_cast<const I *>(args.inputs[1]);
      if (grad_) {
        gatherGradKernel<I><<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
            static_cast<const float *>(args.inputs[0]), idx, static_cast<float *>(args.outputs[0]),
            total_, g_);
        return lastLaunchError(where_);
      }
      return withElementSize(elem_, [&](auto tag) {
        using T = decltype(tag);
        gatherKernel<T, I><<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
            static_cast<const T *>(args.inputs[0]), idx, static_cast<T *>(args.outputs[0]), total_,
            g_);
        return lastLaunchError(where_);
      });
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  bool grad_;
  ir::DType indexType_;
  int64_t elem_, total_;
  size_t outBytes_;
  GatherShape g_;
};

/// GatherElements (grad = false) or GatherElementsGrad (grad = true).
class GatherElementsKernel : public Kernel {
public:
  GatherElementsKernel(const KernelSpec &spec, CudaContext &ctx, bool grad)
      : where_(spec.where()), ctx_(ctx), grad_(grad), indexType_(spec.inputs[1].dtype),
        elem_(ir::dtypeSize(spec.inputs[0].dtype)), total_(spec.inputs[1].numElements()),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {
    const std::vector<int64_t> &data = grad ? spec.outputs[0].shape : spec.inputs[0].shape;
    const int64_t axis = normalizedAxis(spec, data.size());
    std::vector<int64_t> strides = denseStrides(data);
    axisStride_ = strides[static_cast<size_t>(axis)];
    strides[static_cast<size_t>(axis)] = 0;
    const std::vector<int64_t> &idx = spec.inputs[1].shape;
    m_.rank = static_cast<int>(idx.size());
    for (size_t a = 0; a < idx.size(); ++a) {
      m_.dims[a] = idx[a];
      m_.strides[a] = strides[a];
    }
    coalesce(m_);
    g_.dim = data[static_cast<size_t>(axis)];
    g_.slot = ctx.errorSlot();
    g_.site = ctx.addErrorSite(rangeMessage(spec, axis, g_.dim));
  }
  Status run(const KernelArgs &args) override {
    if (grad_)
      DTC_CUDA_RETURN_IF_ERROR(where_,
                               cudaMemsetAsync(args.outputs[0], 0, outBytes_, ctx_.stream()));
    if (total_ == 0)
      return Status::ok();
    return withIndexType(indexType_, [&](auto itag) {
      using I = decltype(itag);
      const I *idx = static_cast<const I *>(args.inputs[1]);
      if (grad_) {
        gatherElementsGradKernel<I><<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
            static_cast<const float *>(args.inputs[0]), idx, static_cast<float *>(args.outputs[0]),
            total_, m_, axisStride_, g_);
        return lastLaunchError(where_);
      }
      return withElementSize(elem_, [&](auto tag) {
        using T = decltype(tag);
        gatherElementsKernel<T, I><<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
            static_cast<const T *>(args.inputs[0]), idx, static_cast<T *>(args.outputs[0]), total_,
            m_, axisStride_, g_);
        return lastLaunchError(where_);
      });
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  bool grad_;
  ir::DType indexType_;
  int64_t elem_, total_;
  size_t outBytes_;
  StridedMap m_;
  int64_t axisStride_ = 0;
  GatherShape g_;
};

// ---- GatherND, GatherNDGrad, ScatterND, ScatterElements ----------------------------------------

/// GatherND: out[t * slice + k] = in[offset(t) + k].
template <typename T>
__global__ void gatherNDKernel(const T *__restrict__ in, const int64_t *__restrict__ idx,
                               T *__restrict__ out, int64_t total, NDGeometry g, int *slot,
                               int site) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    const int64_t t = e / g.slice, k = e % g.slice;
    const int64_t off = ndOffset(g, t, idx + t * g.m);
    if (off < 0) {
      reportError(slot, site);
      out[e] = T(0);
      continue;
    }
    out[e] = in[off + k];
  }
}

/// GatherNDGrad: dx[offset(t) + k] += dy[t * slice + k] (dx zeroed before).
__global__ void gatherNDGradKernel(const float *__restrict__ dy, const int64_t *__restrict__ idx,
                                   float *__restrict__ dx, int64_t total, NDGeometry g, int *slot,
                                   int site) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    const int64_t t = e / g.slice, k = e % g.slice;
    const int64_t off = ndOffset(g, t, idx + t * g.m);
    if (off < 0) {
      reportError(slot, site);
      continue;
    }
    atomicAdd(dx + off + k, dy[e]);
  }
}

/// ScatterElements/ScatterND's `reduction`.
enum class Reduction : int { kNone, kAdd, kMul, kMin, kMax };

template <typename T> __device__ inline T combined(Reduction r, T d, T u) {
  switch (r) {
  case Reduction::kAdd:
    return static_cast<T>(d + u);
  case Reduction::kMul:
    return static_cast<T>(d * u);
  case Reduction::kMin:
    return u < d ? u : d;
  case Reduction::kMax:
    return u > d ? u : d;
  default:
    return u;
  }
}

/// *addr = combined(r, *addr, u) atomically (a compare-and-swap loop on the element's bits, so
/// every reduction of every 4- or 8-byte type works; repeated indices combine in no fixed
/// order). `none` is a plain store: with repeated indices one of the updates wins.
template <typename T> __device__ inline void atomicCombine(T *addr, T u, Reduction r) {
  if (r == Reduction::kNone) {
    *addr = u;
    return;
  }
  using Bits = typename std::conditional<sizeof(T) == 4, unsigned int, unsigned long long>::type;
  Bits *word = reinterpret_cast<Bits *>(addr);
  Bits old = *word, assumed;
  do {
    assumed = old;
    T current;
    memcpy(&current, &assumed, sizeof(T));
    const T next = combined(r, current, u);
    Bits nextBits;
    memcpy(&nextBits, &next, sizeof(T));
    old = atomicCAS(word, assumed, nextBits);
  } while (old != assumed);
}

/// ScatterND: y[offset(t) + k] (+)= u[t * slice + k] (y starts as a copy of data).
template <typename T>
__global__ void scatterNDKernel(const int64_t *__restrict__ idx, const T *__restrict__ u, T *y,
                                int64_t total, NDGeometry g, Reduction r, int *slot, int site) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    const int64_t t = e / g.slice, k = e % g.slice;
    const int64_t off = ndOffset(g, t, idx + t * g.m);
    if (off < 0) {
      reportError(slot, site);
      continue;
    }
    atomicCombine(y + off + k, u[e], r);
  }
}

/// ScatterElements: y[c with axis coordinate idx[c]] (+)= u[c] (y starts as a copy of data).
template <typename T, typename I>
__global__ void scatterElementsKernel(const I *__restrict__ idx, const T *__restrict__ u, T *y,
                                      int64_t total, StridedMap m, int64_t axisStride, Reduction r,
                                      GatherShape g) {
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    int64_t v = static_cast<int64_t>(idx[e]);
    if (v < 0)
      v += g.dim;
    if (v < 0 || v >= g.dim) {
      reportError(g.slot, g.site);
      continue;
    }
    atomicCombine(y + stridedOffset(m, e) + v * axisStride, u[e], r);
  }
}

/// GatherND (kind 0), GatherNDGrad (1) or ScatterND (2).
class NDKernel : public Kernel {
public:
  NDKernel(const KernelSpec &spec, CudaContext &ctx, int kind)
      : where_(spec.where()), ctx_(ctx), kind_(kind), dtype_(spec.inputs[0].dtype),
        elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        total_(kind == 2
                   ? spec.inputs[2].numElements()
                   : (kind == 1 ? spec.inputs[0].numElements() : spec.outputs[0].numElements())),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {
    const std::vector<int64_t> &data = kind == 1 ? spec.outputs[0].shape : spec.inputs[0].shape;
    g_ = ndGeometry(data, spec.inputs[1].shape, kind == 2 ? 0 : spec.attrInt("batch_dims", 0));
    red_ = reductionOf(spec);
    site_ = ctx.addErrorSite(spec.where() + ": an index tuple is out of range for data " +
                             shapeStr(data));
  }
  Status run(const KernelArgs &args) override {
    if (kind_ == 1)
      DTC_CUDA_RETURN_IF_ERROR(where_,
                               cudaMemsetAsync(args.outputs[0], 0, outBytes_, ctx_.stream()));
    if (kind_ == 2 && args.outputs[0] != args.inputs[0])
      DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemcpyAsync(args.outputs[0], args.inputs[0], outBytes_,
                                                       cudaMemcpyDeviceToDevice, ctx_.stream()));
    if (total_ == 0)
      return Status::ok();
    const int64_t *idx = static_cast<const int64_t *>(args.inputs[1]);
    const unsigned grid = dataGrid(total_);
    if (kind_ == 1) {
      gatherNDGradKernel<<<grid, kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const float *>(args.inputs[0]), idx, static_cast<float *>(args.outputs[0]),
          total_, g_, ctx_.errorSlot(), site_);
      return lastLaunchError(where_);
    }
    if (kind_ == 2)
      return withScatterType(dtype_, [&](auto tag) {
        using T = decltype(tag);
        scatterNDKernel<T><<<grid, kDataBlock, 0, ctx_.stream()>>>(
            idx, static_cast<const T *>(args.inputs[2]), static_cast<T *>(args.outputs[0]), total_,
            g_, red_, ctx_.errorSlot(), site_);
        return lastLaunchError(where_);
      });
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      gatherNDKernel<T><<<grid, kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), idx, static_cast<T *>(args.outputs[0]), total_,
          g_, ctx_.errorSlot(), site_);
      return lastLaunchError(where_);
    });
  }

  /// The `reduction` attribute (the CPU check accepted it).
  static Reduction reductionOf(const KernelSpec &spec) {
    const std::string r = spec.attrString("reduction", "none");
    return r == "add"   ? Reduction::kAdd
           : r == "mul" ? Reduction::kMul
           : r == "min" ? Reduction::kMin
           : r == "max" ? Reduction::kMax
                        : Reduction::kNone;
  }
  /// Calls fn(T{}) for ScatterElements/ScatterND's data types (f32, f64, i32, i64).
  template <typename Fn> static Status withScatterType(ir::DType t, Fn &&fn) {
    switch (t) {
    case ir::DType::kFloat64:
      return fn(double{});
    case ir::DType::kInt32:
      return fn(int32_t{});
    case ir::DType::kInt64:
      return fn(int64_t{});
    default:
      return fn(float{});
    }
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int kind_;
  ir::DType dtype_;
  int64_t elem_, total_;
  size_t outBytes_;
  NDGeometry g_;
  Reduction red_ = Reduction::kNone;
  int site_ = 0;
};

class ScatterElementsKernel : public Kernel {
public:
  ScatterElementsKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), dtype_(spec.inputs[0].dtype),
        indexType_(spec.inputs[1].dtype), total_(spec.inputs[1].numElements()),
        bytes_(static_cast<size_t>(spec.inputs[0].byteSize())), red_(NDKernel::reductionOf(spec)) {
    const std::vector<int64_t> &data = spec.inputs[0].shape;
    const int64_t axis = normalizedAxis(spec, data.size());
    std::vector<int64_t> strides = denseStrides(data);
    axisStride_ = strides[static_cast<size_t>(axis)];
    strides[static_cast<size_t>(axis)] = 0;
    m_ = makeStridedMap(spec.inputs[1].shape, strides);
    coalesce(m_);
    g_.dim = data[static_cast<size_t>(axis)];
    g_.slot = ctx.errorSlot();
    g_.site = ctx.addErrorSite(rangeMessage(spec, axis, g_.dim));
  }
  Status run(const KernelArgs &args) override {
    if (args.outputs[0] != args.inputs[0])
      DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemcpyAsync(args.outputs[0], args.inputs[0], bytes_,
                                                       cudaMemcpyDeviceToDevice, ctx_.stream()));
    if (total_ == 0)
      return Status::ok();
    return NDKernel::withScatterType(dtype_, [&](auto tag) {
      using T = decltype(tag);
      return withIndexType(indexType_, [&](auto itag) {
        using I = decltype(itag);
        scatterElementsKernel<T, I><<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
            static_cast<const I *>(args.inputs[1]), static_cast<const T *>(args.inputs[2]),
            static_cast<T *>(args.outputs[0]), total_, m_, axisStride_, red_, g_);
        return lastLaunchError(where_);
      });
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  ir::DType dtype_, indexType_;
  int64_t total_;
  size_t bytes_;
  Reduction red_;
  StridedMap m_;
  int64_t axisStride_ = 0;
  GatherShape g_;
};

// ---- Resize, ResizeGrad ------------------------------------------------------------------------

enum class AspectPolicy : int { kStretch, kNotLarger, kNotSmaller };

/// The static part of a Resize run: the geometry (its scales are set per run from the scales or
/// sizes input), the resized axes in the order of that input, and the error sites.
struct ResizeStatic {
  ResizeGeometry g;
  int numAxes = 0;
  int axes[kDataMaxRank] = {};
  bool scalesGiven = false;
  AspectPolicy policy = AspectPolicy::kStretch;
  int siteShape = 0, siteAxes = 0;
  int *slot = nullptr;
};

/// Sets g.scale from the run's scales (f32) or sizes (i64) exactly as the CPU kernel does
/// (ops/cpu/Resize.cpp); returns 1 when they do not give the plan's output shape or give a
/// non-positive scale (then every scale is out / in: the coordinates stay clamped in range).
__device__ inline int resizeScales(ResizeStatic &p, const float *scales, const int64_t *sizes) {
  ResizeGeometry &g = p.g;
  for (int d = 0; d < g.rank; ++d)
    g.scale[d] = 1.0;
  int bad = 0;
  if (p.scalesGiven) {
    for (int i = 0; i < p.numAxes; ++i) {
      const int d = p.axes[i];
      const float s = scales[i];
      if (!(s > 0.0f) || !isfinite(s)) {
        bad = 1;
        break;
      }
      const float len = floorf(static_cast<float>(g.in[d]) * s);
      if (static_cast<double>(len) != static_cast<double>(g.out[d]))
        bad = 1;
      g.scale[d] = static_cast<double>(s);
    }
  } else {
    int64_t want[kDataMaxRank];
    for (int d = 0; d < g.rank; ++d)
      want[d] = g.in[d];
    if (p.policy == AspectPolicy::kStretch) {
      for (int i = 0; i < p.numAxes; ++i) {
        const int d = p.axes[i];
        want[d] = sizes[i];
        g.scale[d] = g.in[d] ? static_cast<double>(sizes[i]) / static_cast<double>(g.in[d]) : 1.0;
      }
    } else {
      const bool notLarger = p.policy == AspectPolicy::kNotLarger;
      float s = notLarger ? INFINITY : 0.0f;
      for (int i = 0; i < p.numAxes; ++i) {
        const int d = p.axes[i];
        const float r = static_cast<float>(sizes[i]) / static_cast<float>(g.in[d]);
        s = notLarger ? fminf(s, r) : fmaxf(s, r);
      }
      for (int i = 0; i < p.numAxes; ++i) {
        const int d = p.axes[i];
        const float len = roundf(s * static_cast<float>(g.in[d]));
        want[d] = len >= 0.0f && len < 9.2e18f ? static_cast<int64_t>(len) : -1;
        g.scale[d] = static_cast<double>(s);
      }
    }
    for (int d = 0; d < g.rank; ++d)
      bad = bad || want[d] != g.out[d];
    for (int d = 0; d < g.rank; ++d)
      bad = bad || !(g.scale[d] > 0.0) || !isfinite(g.scale[d]);
  }
  if (bad)
    for (int d = 0; d < g.rank; ++d)
      g.scale[d] = g.in[d] > 0 ? static_cast<double>(g.out[d]) / static_cast<double>(g.in[d]) : 1.0;
  return bad;
}

/// One thread per output element; the first thread of each block derives the scales.
template <typename T, bool Linear>
__global__ void resizeKernel(const T *__restrict__ in, T *__restrict__ out, int64_t total,
                             ResizeStatic p, const float *scales, const int64_t *sizes) {
  __shared__ alignas(8) unsigned char geometryBytes[sizeof(ResizeGeometry)];
  ResizeGeometry &shared = *reinterpret_cast<ResizeGeometry *>(geometryBytes);
  if (threadIdx.x == 0) {
    if (resizeScales(p, scales, sizes) && blockIdx.x == 0)
      reportError(p.slot, p.siteShape);
    shared = p.g;
  }
  __syncthreads();
  const ResizeGeometry g = shared;
  int64_t off[1 << kResizeLinearMax];
  float w[1 << kResizeLinearMax];
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    const int n = resizeCorners(g, e, off, w);
    if (n < 0) {
      reportError(p.slot, p.siteAxes);
      out[e] = T(0);
      continue;
    }
    if constexpr (Linear) {
      float acc = 0.0f;
      for (int k = 0; k < n; ++k)
        acc += w[k] * in[off[k]];
      out[e] = acc;
    } else {
      out[e] = in[off[0]];
    }
  }
}

/// The adjoint: dx[corner] += weight * dy[e] (dx zeroed before).
__global__ void resizeGradKernel(const float *__restrict__ dy, float *__restrict__ dx,
                                 int64_t total, ResizeGeometry g, int *slot, int site) {
  int64_t off[1 << kResizeLinearMax];
  float w[1 << kResizeLinearMax];
  for (int64_t e = gridStart(); e < total; e += gridStride()) {
    const int n = resizeCorners(g, e, off, w);
    if (n < 0) {
      reportError(slot, site);
      continue;
    }
    const float v = dy[e];
    for (int k = 0; k < n; ++k)
      atomicAdd(dx + off[k], w[k] * v);
  }
}

ResizeTransformMode transformOf(const KernelSpec &spec) {
  const std::string ct = spec.attrString("coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel_symmetric")
    return ResizeTransformMode::kHalfPixelSymmetric;
  if (ct == "pytorch_half_pixel")
    return ResizeTransformMode::kPytorchHalfPixel;
  if (ct == "align_corners")
    return ResizeTransformMode::kAlignCorners;
  if (ct == "asymmetric")
    return ResizeTransformMode::kAsymmetric;
  if (ct == "tf_half_pixel_for_nn")
    return ResizeTransformMode::kTfHalfPixelForNn;
  return ResizeTransformMode::kHalfPixel; // the checks reject every other name
}

ResizeNearestMode roundingOf(const KernelSpec &spec) {
  const std::string nm = spec.attrString("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_ceil")
    return ResizeNearestMode::kRoundPreferCeil;
  if (nm == "floor")
    return ResizeNearestMode::kFloor;
  if (nm == "ceil")
    return ResizeNearestMode::kCeil;
  return ResizeNearestMode::kRoundPreferFloor;
}

/// Shapes and modes of a resize from `in` to `out` (scales 1 until set).
ResizeGeometry geometryOf(const KernelSpec &spec, const std::vector<int64_t> &in,
                          const std::vector<int64_t> &out) {
  ResizeGeometry g;
  g.rank = static_cast<int>(in.size());
  g.linear = spec.attrString("mode", "nearest") == "linear";
  g.transform = transformOf(spec);
  g.rounding = roundingOf(spec);
  for (size_t d = 0; d < in.size(); ++d) {
    g.in[d] = in[d];
    g.out[d] = out[d];
    g.scale[d] = 1.0;
  }
  return g;
}

class ResizeKernel : public Kernel {
public:
  ResizeKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        total_(spec.outputs[0].numElements()) {
    p_.g = geometryOf(spec, spec.inputs[0].shape, spec.outputs[0].shape);
    const int64_t rank = p_.g.rank;
    std::vector<int64_t> axes = spec.attrInts("axes");
    if (!spec.attrs.count("axes"))
      for (int64_t i = 0; i < rank; ++i)
        axes.push_back(i);
    for (int64_t a : axes)
      p_.axes[p_.numAxes++] = static_cast<int>(a < 0 ? a + rank : a);
    p_.scalesGiven =
        spec.inputs.size() > 2 && spec.inputs[2].present() && spec.inputs[2].numElements() > 0;
    const std::string policy = spec.attrString("keep_aspect_ratio_policy", "stretch");
    p_.policy = policy == "not_larger"    ? AspectPolicy::kNotLarger
                : policy == "not_smaller" ? AspectPolicy::kNotSmaller
                                          : AspectPolicy::kStretch;
    p_.slot = ctx.errorSlot();
    p_.siteShape =
        ctx.addErrorSite(spec.where() + ": the " + (p_.scalesGiven ? "scales" : "sizes") +
                         " do not give the output shape " + spec.outputs[0].str() +
                         " the kernel was made for (or a non-positive scale)");
    p_.siteAxes = ctx.addErrorSite(spec.where() + ": the scales interpolate along more than " +
                                   std::to_string(kResizeLinearMax) +
                                   " axes; the CUDA kernel supports at most that many");
  }
  Status run(const KernelArgs &args) override {
    const float *scales = p_.scalesGiven ? static_cast<const float *>(args.inputs[2]) : nullptr;
    const int64_t *sizes = p_.scalesGiven ? nullptr : static_cast<const int64_t *>(args.inputs[3]);
    if (p_.g.linear) {
      resizeKernel<float, true><<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const float *>(args.inputs[0]), static_cast<float *>(args.outputs[0]), total_,
          p_, scales, sizes);
      return lastLaunchError(where_);
    }
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      resizeKernel<T, false><<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), static_cast<T *>(args.outputs[0]), total_, p_,
          scales, sizes);
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t elem_, total_;
  ResizeStatic p_;
};

class ResizeGradKernel : public Kernel {
public:
  ResizeGradKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), total_(spec.inputs[0].numElements()),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {
    // X's shape (output 0) resized to dY's (input 0) by the forward; the CPU check proved the
    // input_shape attribute equals output 0 and no dim is 0.
    g_ = geometryOf(spec, spec.outputs[0].shape, spec.inputs[0].shape);
    const std::vector<float> scales = spec.attrFloats("scales");
    for (int d = 0; d < g_.rank; ++d)
      g_.scale[d] = scales.empty() ? static_cast<double>(g_.out[d]) / static_cast<double>(g_.in[d])
                                   : static_cast<double>(scales[static_cast<size_t>(d)]);
    slot_ = ctx.errorSlot();
    site_ = ctx.addErrorSite(spec.where() + ": the scales interpolate along more than " +
                             std::to_string(kResizeLinearMax) +
                             " axes; the CUDA kernel supports at most that many");
  }
  Status run(const KernelArgs &args) override {
    DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemsetAsync(args.outputs[0], 0, outBytes_, ctx_.stream()));
    if (total_ == 0)
      return Status::ok();
    resizeGradKernel<<<dataGrid(total_), kDataBlock, 0, ctx_.stream()>>>(
        static_cast<const float *>(args.inputs[0]), static_cast<float *>(args.outputs[0]), total_,
        g_, slot_, site_);
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t total_;
  size_t outBytes_;
  ResizeGeometry g_;
  int *slot_ = nullptr;
  int site_ = 0;
};

} // namespace

Expected<KernelPtr> createGather(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<GatherKernel>(spec, ctx, /*grad=*/false));
}

Expected<KernelPtr> createGatherGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<GatherKernel>(spec, ctx, /*grad=*/true));
}

Expected<KernelPtr> createGatherElements(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<GatherElementsKernel>(spec, ctx, /*grad=*/false));
}

Expected<KernelPtr> createGatherElementsGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<GatherElementsKernel>(spec, ctx, /*grad=*/true));
}

Expected<KernelPtr> createResize(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ResizeKernel>(spec, ctx));
}

Expected<KernelPtr> createResizeGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ResizeGradKernel>(spec, ctx));
}

Expected<KernelPtr> createGatherND(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<NDKernel>(spec, ctx, 0));
}

Expected<KernelPtr> createGatherNDGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<NDKernel>(spec, ctx, 1));
}

Expected<KernelPtr> createScatterND(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<NDKernel>(spec, ctx, 2));
}

Expected<KernelPtr> createScatterElements(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ScatterElementsKernel>(spec, ctx));
}

} // namespace dtc::ops::cuda
