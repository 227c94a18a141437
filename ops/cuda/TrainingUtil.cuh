// Shared math of the CUDA training kernels (Optimizer.cu, Reduce.cu, Loss.cu): the optimizer
// steps, the reduction plan over run-time axes and the losses with their gradients, as
// __host__ __device__ functions (the formulas of the CPU's Optimizer.cpp, Reduce.cpp, Loss.cpp
// and TensorGradLoss.cpp), so the GPU tests check them against the CPU kernels without a GPU.
// The elementwise math and the broadcasting they build on are in ElementwiseUtil.cuh.
#pragma once

#include "ops/cuda/ElementwiseUtil.cuh"

namespace dtc::ops::cuda {

// ---------------------------------------------------------------------------------------------
// Optimizers (torch 1.13 single-tensor SGD with dampening 0, Adam, AdamW; the CPU's
// Optimizer.cpp): the scalars of one step, then the per-element update.

struct AdamScalars {
  float negStepSize; ///< -lr / (1 - beta1^t)
  float bc2Sqrt;     ///< sqrt(1 - beta2^t)
  float oneMinusB1, oneMinusB2;
  float decay; ///< AdamW: 1 - lr * weight_decay
};

/// The scalars of step `step` (0-based; t = step + 1), computed in double as PyTorch does in
/// Python, then rounded to f32.
DTC_HD AdamScalars adamScalars(float lr, int64_t step, float beta1, float beta2,
                               float weightDecay) {
  const double t = static_cast<double>(step) + 1.0;
  const double bc1 = 1.0 - pow(static_cast<double>(beta1), t);
  const double bc2 = 1.0 - pow(static_cast<double>(beta2), t);
  AdamScalars s;
  s.negStepSize = static_cast<float>(-static_cast<double>(lr) / bc1);
  s.bc2Sqrt = static_cast<float>(sqrt(bc2));
  s.oneMinusB1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  s.oneMinusB2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  s.decay = static_cast<float>(1.0 - static_cast<double>(lr) * static_cast<double>(weightDecay));
  return s;
}

/// One Adam (adamw = false: L2 weight decay added to the gradient) or AdamW (decoupled decay)
/// element update: p, m, v in, updated in place.
DTC_HD void adamStep(bool adamw, const AdamScalars &s, float beta1, float beta2, float eps,
                     float weightDecay, float scale, float g, float &p, float &m, float &v) {
  float pi, gi;
  if (adamw) {
    pi = p * s.decay;
    gi = g * scale;
  } else {
    pi = p;
    gi = g * scale + weightDecay * p;
  }
  const float mi = m * beta1 + s.oneMinusB1 * gi;
  const float vi = v * beta2 + s.oneMinusB2 * gi * gi;
  m = mi;
  v = vi;
  p = pi + s.negStepSize * (mi / (sqrtf(vi) / s.bc2Sqrt + eps));
}

/// One SGD element update; `buf` (the momentum buffer) is used when momentum != 0.
DTC_HD void sgdStep(float lr, float momentum, bool nesterov, float weightDecay, float scale,
                    float g, float &p, float &buf) {
  const float pi = p;
  const float d = g * scale + weightDecay * pi;
  if (momentum == 0.f) {
    p = pi + (-lr) * d;
    return;
  }
  const float b = buf * momentum + d;
  buf = b;
  p = pi + (-lr) * (nesterov ? d + momentum * b : b);
}

/// ClipGradNormScale: input_scale * min(max_norm / (input_scale * sqrt(sum) + 1e-6), 1); NaN
/// stays NaN (torch.clamp).
DTC_HD float clipGradNormScale(double sumSquares, float maxNorm, float inputScale) {
  const double norm = static_cast<double>(inputScale) * sqrt(sumSquares);
  double coef = static_cast<double>(maxNorm) / (norm + 1e-6);
  coef = coef != coef ? coef : (coef < 1.0 ? coef : 1.0);
  return static_cast<float>(inputScale * coef);
}

// ---------------------------------------------------------------------------------------------
// Reductions over run-time axes: the plan (kept and reduced dims, collapsed, with input
// strides) is built by the same function on the host (static axes) and on the device (axes in
// device memory), so no kernel waits for the host.

constexpr int kMaxReduceRank = 12;

// Trivial types (no member initializers: the kernels keep a ReducePlan in shared memory);
// value-initialize them ({}) on the host.
struct ReduceShape {
  int rank;
  int64_t in[kMaxReduceRank];
  int outRank;
  int64_t out[kMaxReduceRank];
  bool keepdims;
  bool noopWithEmptyAxes;
};

struct ReducePlan {
  int ok; ///< 1 when the axes were valid and gave the plan's output shape
  int nk; ///< collapsed kept dims (row-major order of the output)
  int nr; ///< collapsed reduced dims
  int64_t keptDims[kMaxReduceRank], keptStrides[kMaxReduceRank];
  int64_t redDims[kMaxReduceRank], redStrides[kMaxReduceRank];
  int64_t mid; ///< elements per output (product of the reduced dims)

  DTC_HD int64_t keptOffset(int64_t o) const {
    int64_t off = 0;
    for (int d = nk - 1; d >= 0; --d) {
      const int64_t q = o / keptDims[d];
      off += (o - q * keptDims[d]) * keptStrides[d];
      o = q;
    }
    return off;
  }
  DTC_HD int64_t reducedOffset(int64_t r) const {
    if (nr == 1)
      return r * redStrides[0];
    int64_t off = 0;
    for (int d = nr - 1; d >= 0; --d) {
      const int64_t q = r / redDims[d];
      off += (r - q * redDims[d]) * redStrides[d];
      r = q;
    }
    return off;
  }
};

/// Builds the plan from `numAxes` axes (ONNX: negative counts from the end; none: every axis,
/// or nothing with noop_with_empty_axes). plan.ok = 0 for an axis out of range, an axis named
/// twice, or axes that do not give the output shape (the CPU kernel's run-time checks).
DTC_HD void buildReducePlan(const ReduceShape &s, const int64_t *axes, int64_t numAxes,
                            ReducePlan &plan) {
  plan.ok = 0;
  plan.nk = plan.nr = 0;
  plan.mid = 1;
  bool named[kMaxReduceRank] = {};
  bool copy = false;
  if (numAxes == 0) {
    copy = s.noopWithEmptyAxes;
    for (int d = 0; d < s.rank; ++d)
      named[d] = !copy;
  } else {
    for (int64_t i = 0; i < numAxes; ++i) {
      int64_t a = axes[i];
      if (a < -s.rank || a >= s.rank)
        return;
      if (a < 0)
        a += s.rank;
      if (named[a])
        return;
      named[a] = true;
    }
  }
  // The output shape the axes give must be the plan's.
  int j = 0;
  for (int d = 0; d < s.rank; ++d) {
    int64_t expect = -1;
    if (!named[d])
      expect = s.in[d];
    else if (s.keepdims)
      expect = 1;
    if (expect < 0)
      continue;
    if (j >= s.outRank || s.out[j] != expect)
      return;
    ++j;
  }
  if (j != s.outRank)
    return;
  // Row-major input strides; collapse neighbours of one kind that are contiguous.
  int64_t strides[kMaxReduceRank];
  int64_t st = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    strides[d] = st;
    st *= s.in[d];
  }
  for (int d = 0; d < s.rank; ++d) {
    if (s.in[d] == 1)
      continue;
    const bool reduced = named[d];
    int &n = reduced ? plan.nr : plan.nk;
    int64_t *dims = reduced ? plan.redDims : plan.keptDims;
    int64_t *strs = reduced ? plan.redStrides : plan.keptStrides;
    if (n > 0 && strs[n - 1] == strides[d] * s.in[d]) {
      dims[n - 1] *= s.in[d];
      strs[n - 1] = strides[d];
    } else {
      dims[n] = s.in[d];
      strs[n] = strides[d];
      ++n;
    }
    if (reduced)
      plan.mid *= s.in[d];
  }
  // An empty input: the reduced count is 0 when a reduced dim is 0 (mid = 0 from the product).
  for (int d = 0; d < s.rank; ++d)
    if (named[d] && s.in[d] == 0)
      plan.mid = 0;
  plan.ok = 1;
}

enum class ReduceOp : int32_t { kMean, kSum, kMax, kMin, kProd, kL1, kL2, kLogSumExp, kSumSquare };

inline bool reduceOpOf(const std::string &op, ReduceOp &out) {
  static const std::pair<const char *, ReduceOp> kOps[] = {
      {"ReduceMean", ReduceOp::kMean},
      {"ReduceSum", ReduceOp::kSum},
      {"ReduceMax", ReduceOp::kMax},
      {"ReduceMin", ReduceOp::kMin},
      {"ReduceProd", ReduceOp::kProd},
      {"ReduceL1", ReduceOp::kL1},
      {"ReduceL2", ReduceOp::kL2},
      {"ReduceLogSumExp", ReduceOp::kLogSumExp},
      {"ReduceSumSquare", ReduceOp::kSumSquare},
  };
  for (const auto &[name, value] : kOps)
    if (op == name) {
      out = value;
      return true;
    }
  return false;
}

/// Accumulation of reductions: double for f32 inputs, wrapping int64 for i64 (numpy).
template <typename A> DTC_HD A reduceInit(ReduceOp op) {
  if constexpr (std::is_integral_v<A>) {
    if (op == ReduceOp::kMax || op == ReduceOp::kLogSumExp)
      return INT64_MIN;
    if (op == ReduceOp::kMin)
      return INT64_MAX;
  } else {
    if (op == ReduceOp::kMax || op == ReduceOp::kLogSumExp)
      return -static_cast<A>(INFINITY);
    if (op == ReduceOp::kMin)
      return static_cast<A>(INFINITY);
  }
  return op == ReduceOp::kProd ? A(1) : A(0);
}

template <typename A> DTC_HD A wrapAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

template <typename A> DTC_HD A wrapMul(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

/// Folds one element v into the accumulator (for LogSumExp: the max pass).
template <typename A> DTC_HD A reduceStep(ReduceOp op, A a, A v) {
  switch (op) {
  case ReduceOp::kMax:
  case ReduceOp::kLogSumExp:
    return (v > a || v != v) ? v : a; // NaN propagates
  case ReduceOp::kMin:
    return (v < a || v != v) ? v : a;
  case ReduceOp::kProd:
    return wrapMul(a, v);
  case ReduceOp::kL1:
    return wrapAdd(a, v < A(0) ? wrapMul(v, A(-1)) : v);
  case ReduceOp::kL2:
  case ReduceOp::kSumSquare:
    return wrapAdd(a, wrapMul(v, v));
  default:
    return wrapAdd(a, v);
  }
}

/// Combines two partial accumulators (max/min/prod/sum-like).
template <typename A> DTC_HD A reduceCombine(ReduceOp op, A a, A b) {
  switch (op) {
  case ReduceOp::kMax:
  case ReduceOp::kLogSumExp:
    return (b > a || b != b) ? b : a;
  case ReduceOp::kMin:
    return (b < a || b != b) ? b : a;
  case ReduceOp::kProd:
    return wrapMul(a, b);
  default:
    return wrapAdd(a, b);
  }
}

/// The final value from the accumulator over `count` elements (Mean divides, L2 takes the
/// root; an empty f32 mean is NaN, an empty i64 mean 0).
template <typename A> DTC_HD A reduceFinish(ReduceOp op, A a, int64_t count) {
  if (op == ReduceOp::kMean) {
    if constexpr (std::is_integral_v<A>)
      return count ? a / count : 0;
    else
      return count ? a / static_cast<A>(count) : static_cast<A>(NAN);
  }
  if constexpr (!std::is_integral_v<A>)
    if (op == ReduceOp::kL2)
      return sqrt(a);
  return a;
}

// ---------------------------------------------------------------------------------------------
// Losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and their gradients; the CPU's
// Loss.cpp and TensorGradLoss.cpp): scores (N, C, D), one sample per (n, j). `group` threads
// (1, or a whole block of kBlock on the device) work on one sample; `lane` is this thread's
// index among them.

struct LossShape {
  int64_t n, c, d; ///< scores (N, C, D)
  bool labels32;   ///< i32 labels (else i64)
  bool hasIgnore;  ///< ignore_index given
  int64_t ignore;  ///< ignore_index
  int reduction;   ///< 0 none, 1 sum, 2 mean
  int site;        ///< error site of an out-of-range label
  DTC_HD int64_t samples() const { return n * d; }
};

DTC_HD int64_t loadLabel(const void *labels, bool is32, int64_t i) {
  return is32 ? static_cast<const int32_t *>(labels)[i] : static_cast<const int64_t *>(labels)[i];
}

/// The label of sample i, or -1 when it is ignored; reports (and ignores) one out of range.
DTC_HD int64_t sampleLabel(const LossShape &s, const void *labels, int64_t i, int *errorSlot) {
  const int64_t y = loadLabel(labels, s.labels32, i);
  if (s.hasIgnore && y == s.ignore)
    return -1;
  if (y < 0 || y >= s.c) {
    reportError(errorSlot, s.site);
    return -1;
  }
  return y;
}

/// Forward, per sample: the loss -w[y] logp[y] (0 for an ignored sample) and its weight, to
/// `loss` (reduction none) or to scratch[i] and scratch[samples + i]; log_prob when asked.
/// The log-softmax as the CPU: max in f32, sum of exponentials and log-sum-exp in double.
DTC_HD void lossSample(const LossShape &s, bool softmax, const float *x, const void *labels,
                       const float *w, float *loss, float *logProb, double *scratch, int *errorSlot,
                       int64_t i, int lane, int group, float *fscratch, double *dscratch) {
  const int64_t n = i / s.d, j = i - n * s.d;
  const float *col = x + n * s.c * s.d + j; // class c at col[c * d]
  const int64_t y = sampleLabel(s, labels, i, errorSlot);
  double lpy = 0.0;
  if (softmax) {
    float mx = -INFINITY;
    for (int64_t c = lane; c < s.c; c += group) {
      const float v = col[c * s.d];
      mx = mx < v ? v : mx;
    }
    double se = 0.0;
#ifdef __CUDA_ARCH__
    if (group > 1)
      mx = blockMax(mx, fscratch);
#endif
    for (int64_t c = lane; c < s.c; c += group)
      se += exp(static_cast<double>(col[c * s.d]) - mx);
#ifdef __CUDA_ARCH__
    if (group > 1)
      se = blockSum(se, dscratch);
#endif
    const double lse = static_cast<double>(mx) + log(se);
    if (logProb)
      for (int64_t c = lane; c < s.c; c += group)
        logProb[n * s.c * s.d + c * s.d + j] = static_cast<float>(col[c * s.d] - lse);
    if (y >= 0)
      lpy = static_cast<float>(col[y * s.d] - lse);
  } else if (y >= 0) {
    lpy = col[y * s.d];
  }
  (void)fscratch;
  (void)dscratch;
  if (lane != 0)
    return;
  const double wt = y < 0 ? 0.0 : (w ? w[y] : 1.0);
  const double l = y < 0 ? 0.0 : -wt * lpy;
  if (s.reduction == 0) {
    loss[i] = static_cast<float>(l);
  } else {
    scratch[i] = l;
    scratch[s.samples() + i] = wt;
  }
}

/// The per-sample factor of both gradients (0 for an ignored sample; y set to its label or
/// -1): w[y] dloss[i] (none) or w[y] g, g = dloss (sum) or dloss / sum of applied weights (mean).
DTC_HD float sampleScale(const LossShape &s, const float *dloss, const void *labels, const float *w,
                         const double *g, int64_t i, int *errorSlot, int64_t &y) {
  y = sampleLabel(s, labels, i, errorSlot);
  if (y < 0)
    return 0.f;
  const float wt = w ? w[y] : 1.f;
  return s.reduction == 0 ? wt * dloss[i] : static_cast<float>(wt * *g);
}

/// dscores = scale (softmax - onehot) + dlp - softmax sum(dlp) for one sample. Every class is
/// read (max, sums) before any is written, and the write of class c reads class c first: dx may
/// be the scores' buffer.
DTC_HD void sceGradSample(const LossShape &s, const float *dloss, const float *x,
                          const void *labels, const float *w, const float *dlp, const double *g,
                          float *dx, int *errorSlot, int64_t i, int lane, int group,
                          float *fscratch, double *dscratch) {
  const int64_t n = i / s.d, j = i - n * s.d;
  const int64_t off = n * s.c * s.d + j; // class c at off + c * d
  int64_t y;
  const float scale = sampleScale(s, dloss, labels, w, g, i, errorSlot, y);
  float mx = -INFINITY;
  for (int64_t c = lane; c < s.c; c += group) {
    const float v = x[off + c * s.d];
    mx = mx < v ? v : mx;
  }
#ifdef __CUDA_ARCH__
  if (group > 1)
    mx = blockMax(mx, fscratch);
#endif
  double se = 0.0, sd = 0.0;
  for (int64_t c = lane; c < s.c; c += group) {
    se += exp(static_cast<double>(x[off + c * s.d]) - mx);
    if (dlp)
      sd += dlp[off + c * s.d];
  }
#ifdef __CUDA_ARCH__
  if (group > 1) {
    se = blockSum(se, dscratch);
    if (dlp)
      sd = blockSum(sd, dscratch);
  }
#endif
  (void)fscratch;
  (void)dscratch;
  const float inv = static_cast<float>(1.0 / se);
  const float coef = dlp ? scale - static_cast<float>(sd) : scale;
  for (int64_t c = lane; c < s.c; c += group) {
    const int64_t k = off + c * s.d;
    const float p = expf(x[k] - mx) * inv;
    float v = dlp ? p * coef + dlp[k] : p * coef;
    if (c == y)
      v -= scale;
    dx[k] = v;
  }
}

} // namespace dtc::ops::cuda
