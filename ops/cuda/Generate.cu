// CUDA kernels of the ops that generate or mask values: Dropout (inference: a copy and an
// all-true mask; a true training_mode input is an error site), ai.dtc.DropoutTraining (the CPU's
// Philox4x32-10 stream, so masks match the CPU bit for bit) and ai.dtc.DropoutGrad, Trilu (k read
// on the device), OneHot (depth checked on the device against the plan's output), CumSum (axis
// read on the device; one thread per line sums in the CPU's order, so results match exactly),
// ConstantOfShape (the value attribute; the shape input is implied by the static output shape)
// Range (start/limit/delta read on the device, the length checked against the plan's), and
// Shape and Size (values known from the static input shape).
// Scalars that the CPU reads on the host are read here by every thread (one cached load) or by
// the first thread, which records an error site when they disagree with the plan: nothing in
// run() synchronizes with the host.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DataUtil.cuh"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dtc::ops::cuda {

namespace {

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

// ---- Dropout, DropoutTraining, DropoutGrad -----------------------------------------------------

/// y = x (skipped in place), mask = 1; a true training_mode is an error.
template <typename T>
__global__ void dropoutInferenceKernel(const T *x, T *y, uint8_t *mask, int64_t n,
                                       const uint8_t *trainingMode, int *slot, int site) {
  if (trainingMode && blockIdx.x == 0 && threadIdx.x == 0 && *trainingMode)
    reportError(slot, site);
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    if (y != x)
      y[e] = x[e];
    if (mask)
      mask[e] = 1;
  }
}

/// One thread per Philox block of 4 elements: y = keep ? x * scale : 0, mask = keep.
__global__ void dropoutTrainingKernel(const float *x, const int64_t *rng, float *y, uint8_t *mask,
                                      int64_t n, uint32_t stream, uint64_t threshold, float scale) {
  const uint64_t seed = static_cast<uint64_t>(rng[0]);
  const uint32_t step = static_cast<uint32_t>(rng[1]), rank = static_cast<uint32_t>(rng[2]);
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = gridStart(); b < blocks; b += gridStride()) {
    bool keep[4];
    dropoutKeep(b, seed, step, rank, stream, threshold, keep);
    const int64_t base = 4 * b, lanes = n - base < 4 ? n - base : 4;
    for (int64_t l = 0; l < lanes; ++l) {
      const float v = x[base + l];
      mask[base + l] = keep[l] ? 1 : 0;
      y[base + l] = keep[l] ? v * scale : 0.f;
    }
  }
}

__global__ void dropoutGradKernel(const float *dy, const uint8_t *mask, float *dx, int64_t n,
                                  float scale) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    dx[e] = mask[e] ? dy[e] * scale : 0.f;
}

class DropoutKernel : public Kernel {
public:
  DropoutKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        n_(spec.inputs[0].numElements()),
        hasMask_(spec.outputs.size() > 1 && spec.outputs[1].present()),
        hasMode_(spec.inputs.size() > 2 && spec.inputs[2].present()),
        site_(ctx.addErrorSite(spec.where() + ": training-mode Dropout runs in training plans "
                                              "(ai.dtc.DropoutTraining), not in this kernel")) {}
  Status run(const KernelArgs &args) override {
    if (n_ == 0)
      return Status::ok();
    uint8_t *mask = hasMask_ ? static_cast<uint8_t *>(args.outputs[1]) : nullptr;
    const uint8_t *mode = hasMode_ ? static_cast<const uint8_t *>(args.inputs[2]) : nullptr;
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      dropoutInferenceKernel<T><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), static_cast<T *>(args.outputs[0]), mask, n_, mode,
          ctx_.errorSlot(), site_);
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t elem_, n_;
  bool hasMask_, hasMode_;
  int site_;
};

class DropoutTrainingKernel : public Kernel {
public:
  DropoutTrainingKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), n_(spec.inputs[0].numElements()),
        stream_(static_cast<uint32_t>(spec.attrInt("stream", 0))) {
    const double ratio = spec.attrFloat("ratio", 0.5f);
    threshold_ = static_cast<uint64_t>(std::floor(ratio * 4294967296.0));
    scale_ = static_cast<float>(1.0 / (1.0 - ratio));
  }
  Status run(const KernelArgs &args) override {
    const int64_t blocks = (n_ + 3) / 4;
    dropoutTrainingKernel<<<dataGrid(blocks), kDataBlock, 0, ctx_.stream()>>>(
        static_cast<const float *>(args.inputs[0]), static_cast<const int64_t *>(args.inputs[1]),
        static_cast<float *>(args.outputs[0]), static_cast<uint8_t *>(args.outputs[1]), n_, stream_,
        threshold_, scale_);
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t n_;
  uint32_t stream_;
  uint64_t threshold_ = 0;
  float scale_ = 1.0f;
};

class DropoutGradKernel : public Kernel {
public:
  DropoutGradKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), n_(spec.inputs[0].numElements()),
        scale_(static_cast<float>(1.0 / (1.0 - spec.attrFloat("ratio", 0.5f)))) {}
  Status run(const KernelArgs &args) override {
    dropoutGradKernel<<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
        static_cast<const float *>(args.inputs[0]), static_cast<const uint8_t *>(args.inputs[1]),
        static_cast<float *>(args.outputs[0]), n_, scale_);
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t n_;
  float scale_;
};

// ---- Trilu -------------------------------------------------------------------------------------

/// Row i of each matrix keeps column j when j - i >= k (upper) or j - i <= k (lower).
template <typename T>
__global__ void triluKernel(const T *x, T *y, int64_t n, int64_t rows, int64_t cols,
                            const int64_t *kPtr, bool upper) {
  const int64_t k = kPtr ? *kPtr : 0;
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    // Upper keeps columns [i + k, cols), lower [0, i + k]; j - i never overflows.
    const bool keep = upper ? j - i >= k : j - i <= k;
    y[e] = keep ? x[e] : T(0);
  }
}

class TriluKernel : public Kernel {
public:
  TriluKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), elem_(ir::dtypeSize(spec.inputs[0].dtype)),
        n_(spec.inputs[0].numElements()), upper_(spec.attrInt("upper", 1) != 0),
        hasK_(spec.inputs.size() > 1 && spec.inputs[1].present()) {
    const std::vector<int64_t> &s = spec.inputs[0].shape;
    rows_ = s[s.size() - 2];
    cols_ = s.back();
  }
  Status run(const KernelArgs &args) override {
    const int64_t *k = hasK_ ? static_cast<const int64_t *>(args.inputs[1]) : nullptr;
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      triluKernel<T><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), static_cast<T *>(args.outputs[0]), n_, rows_,
          cols_, k, upper_);
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t elem_, n_;
  bool upper_, hasK_;
  int64_t rows_ = 0, cols_ = 0;
};

// ---- OneHot ------------------------------------------------------------------------------------

template <typename I> __device__ inline int64_t truncIndex(I v) {
  if constexpr (IsFloat<I>::value) {
    const double d = trunc(static_cast<double>(v));
    // Out of int64's range (or NaN): no position matches.
    return d >= -9.2e18 && d <= 9.2e18 ? static_cast<int64_t>(d) : INT64_MIN;
  } else {
    return static_cast<int64_t>(v);
  }
}

/// out[o, j, i] = values[idx[o, i] == j] (an index < 0 counts from the end; out of range: off).
template <typename T, typename I, typename D>
__global__ void oneHotKernel(const I *idx, const D *depthPtr, const T *values, T *out, int64_t n,
                             int64_t depth, int64_t inner, int *slot, int site) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && truncIndex(*depthPtr) != depth)
    reportError(slot, site);
  const T off = values[0], on = values[1];
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    const int64_t i = e % inner, j = (e / inner) % depth, o = e / (inner * depth);
    int64_t v = truncIndex(idx[o * inner + i]);
    if (v < 0 && v != INT64_MIN)
      v += depth;
    out[e] = v == j ? on : off;
  }
}

template <typename Fn> Status withNumberType(ir::DType t, Fn &&fn) {
  switch (t) {
  case ir::DType::kFloat32:
    return fn(float{});
  case ir::DType::kFloat64:
    return fn(double{});
  case ir::DType::kInt32:
    return fn(int32_t{});
  default:
    return fn(int64_t{});
  }
}

class OneHotKernel : public Kernel {
public:
  OneHotKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), indexType_(spec.inputs[0].dtype),
        depthType_(spec.inputs[1].dtype), elem_(ir::dtypeSize(spec.inputs[2].dtype)),
        n_(spec.outputs[0].numElements()) {
    const int64_t rank = static_cast<int64_t>(spec.outputs[0].shape.size());
    int64_t axis = spec.attrInt("axis", -1);
    if (axis < 0)
      axis += rank;
    const std::vector<int64_t> &id = spec.inputs[0].shape;
    for (size_t k = static_cast<size_t>(axis); k < id.size(); ++k)
      inner_ *= id[k];
    depth_ = spec.outputs[0].shape[static_cast<size_t>(axis)];
    site_ = ctx.addErrorSite(spec.where() + ": depth differs from the output's length " +
                             std::to_string(depth_) + " the plan was made for");
  }
  Status run(const KernelArgs &args) override {
    return withNumberType(indexType_, [&](auto itag) {
      using I = decltype(itag);
      return withNumberType(depthType_, [&](auto dtag) {
        using D = decltype(dtag);
        return withElementSize(elem_, [&](auto tag) {
          using T = decltype(tag);
          oneHotKernel<T, I, D><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
              static_cast<const I *>(args.inputs[0]), static_cast<const D *>(args.inputs[1]),
              static_cast<const T *>(args.inputs[2]), static_cast<T *>(args.outputs[0]), n_, depth_,
              inner_, ctx_.errorSlot(), site_);
          return lastLaunchError(where_);
        });
      });
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  ir::DType indexType_, depthType_;
  int64_t elem_, n_;
  int64_t inner_ = 1, depth_ = 0;
  int site_ = 0;
};

// ---- CumSum ------------------------------------------------------------------------------------

/// Per axis a of the input: outer (dims before a), n (dim a) and inner (dims after a).
struct CumSumShape {
  int rank = 0;
  int64_t outer[kDataMaxRank] = {}, n[kDataMaxRank] = {}, inner[kDataMaxRank] = {};
  bool exclusive = false, reverse = false, axisIs64 = false;
  int *slot = nullptr;
  int site = 0;
};

/// One thread per (outer, inner) line, summing along the axis in order (the CPU's order).
template <typename T>
__global__ void cumSumKernel(const T *x, T *y, const void *axisPtr, CumSumShape s) {
  int64_t axis = loadIndex(axisPtr, s.axisIs64, 0);
  if (axis < 0)
    axis += s.rank;
  if (axis < 0 || axis >= s.rank) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      reportError(s.slot, s.site);
    return;
  }
  const int64_t outer = s.outer[axis], n = s.n[axis], inner = s.inner[axis];
  for (int64_t line = gridStart(); line < outer * inner; line += gridStride()) {
    const int64_t o = line / inner, i = line % inner;
    T acc = T(0);
    for (int64_t step = 0; step < n; ++step) {
      const int64_t j = s.reverse ? n - 1 - step : step;
      const int64_t at = (o * n + j) * inner + i;
      const T v = x[at];
      if (s.exclusive) {
        y[at] = acc;
        acc += v;
      } else {
        acc += v;
        y[at] = acc;
      }
    }
  }
}

class CumSumKernel : public Kernel {
public:
  CumSumKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), dtype_(spec.inputs[0].dtype) {
    const std::vector<int64_t> &shape = spec.inputs[0].shape;
    s_.rank = static_cast<int>(shape.size());
    for (int a = 0; a < s_.rank; ++a) {
      s_.outer[a] = s_.inner[a] = 1;
      for (int k = 0; k < a; ++k)
        s_.outer[a] *= shape[static_cast<size_t>(k)];
      for (int k = a + 1; k < s_.rank; ++k)
        s_.inner[a] *= shape[static_cast<size_t>(k)];
      s_.n[a] = shape[static_cast<size_t>(a)];
      maxLines_ = std::max(maxLines_, s_.outer[a] * s_.inner[a]);
    }
    s_.exclusive = spec.attrInt("exclusive", 0) != 0;
    s_.reverse = spec.attrInt("reverse", 0) != 0;
    s_.axisIs64 = spec.inputs[1].dtype == ir::DType::kInt64;
    s_.slot = ctx.errorSlot();
    s_.site = ctx.addErrorSite(spec.where() + ": the axis input is out of range for rank " +
                               std::to_string(s_.rank));
  }
  Status run(const KernelArgs &args) override {
    auto launch = [&](auto tag) {
      using T = decltype(tag);
      cumSumKernel<T><<<dataGrid(std::max<int64_t>(maxLines_, 1)), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const T *>(args.inputs[0]), static_cast<T *>(args.outputs[0]), args.inputs[1],
          s_);
      return lastLaunchError(where_);
    };
    switch (dtype_) {
    case ir::DType::kFloat64:
      return launch(double{});
    case ir::DType::kInt32:
      return launch(int32_t{});
    case ir::DType::kInt64:
      return launch(int64_t{});
    default:
      return launch(float{});
    }
  }

private:
  std::string where_;
  CudaContext &ctx_;
  ir::DType dtype_;
  CumSumShape s_;
  int64_t maxLines_ = 0;
};

// ---- ConstantOfShape, Range --------------------------------------------------------------------

template <typename T> __global__ void fillKernel(T *out, int64_t n, T value) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    out[e] = value;
}

class ConstantOfShapeKernel : public Kernel {
public:
  ConstantOfShapeKernel(const KernelSpec &spec, CudaContext &ctx, uint64_t bits)
      : where_(spec.where()), ctx_(ctx), elem_(ir::dtypeSize(spec.outputs[0].dtype)),
        n_(spec.outputs[0].numElements()), bits_(bits) {}
  Status run(const KernelArgs &args) override {
    return withElementSize(elem_, [&](auto tag) {
      using T = decltype(tag);
      T value;
      std::memcpy(&value, &bits_, sizeof value); // little-endian: the low bytes
      fillKernel<T><<<dataGrid(n_), kDataBlock, 0, ctx_.stream()>>>(
          static_cast<T *>(args.outputs[0]), n_, value);
      return lastLaunchError(where_);
    });
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t elem_, n_;
  uint64_t bits_;
};

/// max(ceil((limit - start) / delta), 0) in exact integer arithmetic (delta != 0): the CPU's
/// intRangeLength.
__device__ inline int64_t intRangeLength(int64_t start, int64_t limit, int64_t delta) {
  const __int128 span = static_cast<__int128>(limit) - start;
  __int128 q = span / delta;
  if (q * delta != span && ((span > 0) == (delta > 0)))
    ++q;
  if (q > INT64_MAX)
    return INT64_MAX;
  return q > 0 ? static_cast<int64_t>(q) : int64_t{0};
}

/// Integer Range: out[k] = start + k * delta (wrapping arithmetic is exact: the values lie
/// between start and limit). The first thread checks the length against the plan's.
template <typename T>
__global__ void intRangeKernel(const T *start, const T *limit, const T *delta, T *out, int64_t n,
                               int *slot, int site) {
  const int64_t s = *start, d = *delta;
  if (blockIdx.x == 0 && threadIdx.x == 0 && (d == 0 || intRangeLength(s, *limit, d) != n))
    reportError(slot, site);
  for (int64_t k = gridStart(); k < n; k += gridStride())
    out[k] = static_cast<T>(static_cast<int64_t>(
        static_cast<uint64_t>(s) + static_cast<uint64_t>(k) * static_cast<uint64_t>(d)));
}

/// Float Range as the CPU (and dtc's folding) computes it: length ceil(float(limit - start) /
/// delta), element k = start + float(k) * delta, rounded after the product (no FMA).
__global__ void floatRangeKernel(const float *start, const float *limit, const float *delta,
                                 float *out, int64_t n, int *slot, int site) {
  const float s = *start, d = *delta;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const float span = static_cast<float>(static_cast<double>(*limit) - static_cast<double>(s));
    const double q = static_cast<double>(ceilf(__fdiv_rn(span, d)));
    const bool finite = d != 0.0f && isfinite(q) && q <= 4.6e18;
    if (!finite || (q > 0 ? static_cast<int64_t>(q) : 0) != n)
      reportError(slot, site);
  }
  for (int64_t k = gridStart(); k < n; k += gridStride())
    out[k] = __fadd_rn(s, __fmul_rn(static_cast<float>(k), d));
}

class RangeKernel : public Kernel {
public:
  RangeKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), dtype_(spec.inputs[0].dtype), n_(spec.outputs[0].shape[0]),
        site_(ctx.addErrorSite(spec.where() + ": start, limit and delta do not give the " +
                               std::to_string(spec.outputs[0].shape[0]) +
                               " elements the kernel was made for (or delta is 0)")) {}
  Status run(const KernelArgs &args) override {
    // n_ > 0 here (the registry skips empty outputs); the length check runs in the kernel.
    const unsigned grid = dataGrid(n_);
    switch (dtype_) {
    case ir::DType::kFloat32:
      floatRangeKernel<<<grid, kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const float *>(args.inputs[0]), static_cast<const float *>(args.inputs[1]),
          static_cast<const float *>(args.inputs[2]), static_cast<float *>(args.outputs[0]), n_,
          ctx_.errorSlot(), site_);
      break;
    case ir::DType::kInt32:
      intRangeKernel<int32_t><<<grid, kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const int32_t *>(args.inputs[0]),
          static_cast<const int32_t *>(args.inputs[1]),
          static_cast<const int32_t *>(args.inputs[2]), static_cast<int32_t *>(args.outputs[0]), n_,
          ctx_.errorSlot(), site_);
      break;
    default:
      intRangeKernel<int64_t><<<grid, kDataBlock, 0, ctx_.stream()>>>(
          static_cast<const int64_t *>(args.inputs[0]),
          static_cast<const int64_t *>(args.inputs[1]),
          static_cast<const int64_t *>(args.inputs[2]), static_cast<int64_t *>(args.outputs[0]), n_,
          ctx_.errorSlot(), site_);
      break;
    }
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  ir::DType dtype_;
  int64_t n_;
  int site_;
};

// ---- Shape, Size -------------------------------------------------------------------------------

/// Up to kDataMaxRank int64 values known when the kernel is made.
struct KnownValues {
  int64_t v[kDataMaxRank] = {};
  int n = 0;
};

__global__ void writeValuesKernel(int64_t *out, KnownValues k) {
  for (int i = threadIdx.x; i < k.n; i += blockDim.x)
    out[i] = k.v[i];
}

/// Shape (the input's dims in [start, end), ONNX Shape-15 clamping) or Size (its element count):
/// both follow from the static input shape; its data is not read.
class KnownValuesKernel : public Kernel {
public:
  KnownValuesKernel(const KernelSpec &spec, CudaContext &ctx) : where_(spec.where()), ctx_(ctx) {
    const std::vector<int64_t> &in = spec.inputs[0].shape;
    if (spec.op == "Size") {
      k_.v[k_.n++] = spec.inputs[0].numElements();
      return;
    }
    const int64_t rank = static_cast<int64_t>(in.size());
    int64_t start = spec.attrInt("start", 0), end = spec.attrInt("end", rank);
    start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
    end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
    for (int64_t a = start; a < end; ++a)
      k_.v[k_.n++] = in[static_cast<size_t>(a)];
  }
  Status run(const KernelArgs &args) override {
    writeValuesKernel<<<1, 32, 0, ctx_.stream()>>>(static_cast<int64_t *>(args.outputs[0]), k_);
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  KnownValues k_;
};

} // namespace

Expected<KernelPtr> createDropout(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<DropoutKernel>(spec, ctx));
}

Expected<KernelPtr> createDropoutTraining(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<DropoutTrainingKernel>(spec, ctx));
}

Expected<KernelPtr> createDropoutGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<DropoutGradKernel>(spec, ctx));
}

Expected<KernelPtr> createTrilu(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<TriluKernel>(spec, ctx));
}

Expected<KernelPtr> createOneHot(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<OneHotKernel>(spec, ctx));
}

Expected<KernelPtr> createCumSum(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<CumSumKernel>(spec, ctx));
}

Expected<KernelPtr> createConstantOfShape(const KernelSpec &spec, CudaContext &ctx) {
  // The value attribute: one element of the output's dtype (the CPU check), or f32 0.
  uint64_t bits = 0;
  auto it = spec.attrs.find("value");
  if (it != spec.attrs.end() && it->second.kind() == ir::AttrKind::kTensor && it->second.t()) {
    Expected<const std::string *> bytes = it->second.t()->bytes();
    if (!bytes.hasValue())
      return spec.error("attribute 'value': " + bytes.status().message());
    if ((*bytes)->size() != static_cast<size_t>(ir::dtypeSize(spec.outputs[0].dtype)))
      return spec.error("attribute 'value' holds " + std::to_string((*bytes)->size()) +
                        " bytes, expected one " + ir::dtypeName(spec.outputs[0].dtype));
    std::memcpy(&bits, (*bytes)->data(), (*bytes)->size());
  }
  return KernelPtr(std::make_unique<ConstantOfShapeKernel>(spec, ctx, bits));
}

Expected<KernelPtr> createShapeOp(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<KnownValuesKernel>(spec, ctx));
}

Expected<KernelPtr> createRange(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<RangeKernel>(spec, ctx));
}

} // namespace dtc::ops::cuda
