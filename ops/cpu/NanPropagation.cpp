// NaN propagation helpers of the CPU kernels (see NanPropagation.h): the vectorized NaN scans,
// the NaN-keeping Relu loop, and the two wrappers, elementwise and row-wise, that fix up outputs
// after oneDNN ran.
#include "ops/cpu/NanPropagation.h"

#include <algorithm>
#include <cmath>
#include <limits>

// The loops are built for AVX-512, AVX2 and the baseline, picked at load time (gcc's
// target_clones; the compiler's baseline x86-64 has SSE2 only, 4 floats a vector, where oneDNN's
// JIT kernels use the machine's widest).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DTC_VECTOR_CLONES
#endif

namespace dtc::ops::cpu {

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
/// Below this many elements the loops stay on one thread (a parallel region costs more).
constexpr int64_t kParallelGrain = int64_t{1} << 15;
/// Scans work in blocks of this many elements: a branch-free inner loop (no early exit inside a
/// block; `omp simd` so that gcc's -O2 cost model vectorizes it), one test per block.
constexpr int64_t kBlock = 256;

/// What a scan looks for.
enum class Find { kNan, kNonFinite, kNanOrPosInf };

/// One comparison per element (NaN compares false with everything).
template <Find F> inline int hit(float v) {
  constexpr float kMax = std::numeric_limits<float>::max();
  if constexpr (F == Find::kNan)
    return v != v;
  else if constexpr (F == Find::kNonFinite)
    return !(std::fabs(v) <= kMax); // NaN, +inf, -inf
  else
    return !(v <= kMax); // NaN, +inf
}

/// True when hit<F>(p[i]) for some i < n.
template <Find F> inline __attribute__((always_inline)) bool scanRangeBody(const float *p, int64_t n) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int flag = 0;
#pragma omp simd reduction(| : flag)
    for (int64_t j = 0; j < kBlock; ++j)
      flag |= hit<F>(p[i + j]);
    if (flag)
      return true;
  }
  int flag = 0;
  for (; i < n; ++i)
    flag |= hit<F>(p[i]);
  return flag != 0;
}

DTC_VECTOR_CLONES bool scanNanRange(const float *p, int64_t n) {
  return scanRangeBody<Find::kNan>(p, n);
}
DTC_VECTOR_CLONES bool scanNonFiniteRange(const float *p, int64_t n) {
  return scanRangeBody<Find::kNonFinite>(p, n);
}
DTC_VECTOR_CLONES bool scanNanOrPosInfRange(const float *p, int64_t n) {
  return scanRangeBody<Find::kNanOrPosInf>(p, n);
}

template <Find F> bool scanRange(const float *p, int64_t n) {
  if constexpr (F == Find::kNan)
    return scanNanRange(p, n);
  else if constexpr (F == Find::kNonFinite)
    return scanNonFiniteRange(p, n);
  else
    return scanNanOrPosInfRange(p, n);
}

template <Find F> bool scan(const float *p, int64_t n) {
  if (n < kParallelGrain)
    return scanRange<F>(p, n);
  const int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
  int found = 0;
#pragma omp parallel for schedule(static) reduction(| : found)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kParallelGrain;
    found |= scanRange<F>(p + begin, std::min(kParallelGrain, n - begin)) ? 1 : 0;
  }
  return found != 0;
}

/// Appends the indices i in [0, n) with p[i] NaN.
void appendNanIndices(const float *p, int64_t n, std::vector<int64_t> &out) {
  for (int64_t i = 0; i < n; ++i)
    if (std::isnan(p[i]))
      out.push_back(i);
}

class ElementwiseNanKernel : public Kernel {
public:
  ElementwiseNanKernel(KernelPtr inner, int64_t n) : inner_(std::move(inner)), n_(n) {}

  Status run(const KernelArgs &args) override {
    nanAt_.clear();
    const float *x = static_cast<const float *>(args.inputs[0]);
    if (anyNan(x, n_))
      appendNanIndices(x, n_, nanAt_);
    DTC_RETURN_IF_ERROR(inner_->run(args));
    float *y = static_cast<float *>(args.outputs[0]);
    for (int64_t i : nanAt_)
      y[i] = kNan;
    return Status::ok();
  }

private:
  KernelPtr inner_;
  int64_t n_;
  std::vector<int64_t> nanAt_; ///< reused between runs (allocates only when NaN is present)
};

class RowNanKernel : public Kernel {
public:
  RowNanKernel(KernelPtr inner, int64_t outer, int64_t len, int64_t innerSize)
      : inner_(std::move(inner)), outer_(outer), len_(len), innerSize_(innerSize) {}

  Status run(const KernelArgs &args) override {
    const float *x = static_cast<const float *>(args.inputs[0]);
    const int64_t n = outer_ * len_ * innerSize_;
    rows_.clear();
    if (scan<Find::kNanOrPosInf>(x, n)) {
      std::vector<int64_t> at;
      for (int64_t i = 0; i < n; ++i)
        if (hit<Find::kNanOrPosInf>(x[i]))
          at.push_back(i);
      std::vector<bool> seen(static_cast<size_t>(outer_ * innerSize_), false);
      for (int64_t i : at) {
        const int64_t row = (i / (len_ * innerSize_)) * innerSize_ + i % innerSize_;
        if (!seen[static_cast<size_t>(row)]) {
          seen[static_cast<size_t>(row)] = true;
          rows_.push_back(row);
        }
      }
    }
    DTC_RETURN_IF_ERROR(inner_->run(args));
    float *y = static_cast<float *>(args.outputs[0]);
    for (int64_t row : rows_) {
      float *base = y + (row / innerSize_) * len_ * innerSize_ + row % innerSize_;
      for (int64_t l = 0; l < len_; ++l)
        base[l * innerSize_] = kNan;
    }
    return Status::ok();
  }

private:
  KernelPtr inner_;
  int64_t outer_, len_, innerSize_;
  std::vector<int64_t> rows_; ///< rows (outer * inner + inner index) holding NaN or +inf
};

} // namespace

bool anyNan(const float *p, int64_t n) { return scan<Find::kNan>(p, n); }

bool anyNonFinite(const float *p, int64_t n) { return scan<Find::kNonFinite>(p, n); }

namespace {

DTC_VECTOR_CLONES void reluRange(const float *x, float *y, int64_t n) {
  // `v < 0 ? 0 : v` keeps NaN (NaN < 0 is false). gcc's -O2 cost model (very cheap) does not
  // vectorize a loop that needs an alias check and an epilogue: `simd` asks for it (x == y is
  // fine: element i is read before it is written).
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v < 0.f ? 0.f : v;
  }
}

} // namespace

void reluKeepNan(const float *x, float *y, int64_t n) {
  if (n < kParallelGrain) {
    reluRange(x, y, n);
    return;
  }
  const int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kParallelGrain;
    reluRange(x + begin, y + begin, std::min(kParallelGrain, n - begin));
  }
}

void setNanWhere(float *out, const float *flag, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (flag[i] != 0.f)
      out[i] = kNan;
}

KernelPtr propagateNanElementwise(KernelPtr inner, int64_t n) {
  return std::make_unique<ElementwiseNanKernel>(std::move(inner), n);
}

KernelPtr propagateNanRows(KernelPtr inner, int64_t outer, int64_t len, int64_t innerSize) {
  return std::make_unique<RowNanKernel>(std::move(inner), outer, len, innerSize);
}

} // namespace dtc::ops::cpu
