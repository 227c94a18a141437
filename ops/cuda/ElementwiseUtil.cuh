// Shared helpers of the hand-written CUDA kernels (the training kernels' math builds on them in
// TrainingUtil.cuh): the per-element math as __host__ __device__ functions (the formulas of the
// CPU kernels in ops/cpu/Unary.cpp, Eltwise.cpp, Binary.cpp, ActivationGradEltwise.cpp, with the
// same NaN behaviour), numpy broadcasting with int64 index math over collapsed dims, and, under
// nvcc, a grid-stride launch helper. Without nvcc the math compiles as plain inline C++, so the
// GPU tests check it against the CPU kernels on a machine without a GPU.
#pragma once

#include "ops/kernel/Kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef __CUDACC__
#define DTC_HD __host__ __device__ inline
#else
#define DTC_HD inline
#endif

namespace dtc::ops::cuda {

/// True when the sign bit of x is set (-0, negative numbers, negative NaN), as std::signbit.
DTC_HD bool signBitF(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_int(x) < 0;
#else
  int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits < 0;
#endif
}

// ---------------------------------------------------------------------------------------------
// Unary ops (f32): the CPU's Unary family, Relu/Sigmoid/Tanh, and their parameters.

enum class UnaryOp : int32_t {
  kRelu,
  kSigmoid,
  kTanh,
  kSqrt,
  kExp,
  kLog,
  kAbs,
  kLeakyRelu,
  kHardSwish,
  kGeluErf,
  kGeluTanh,
  kNeg,
  kReciprocal,
  kErf,
  kHardSigmoid,
  kFloor,
  kCeil,
  kRound,
  kSign,
  kSoftplus,
  kSoftsign,
  kElu,
  kSelu,
  kCelu,
  kMish,
  kSin,
  kCos,
  kClip,
};

/// The ONNX op name (and Gelu's `approximate`) as a UnaryOp; false for an op of another family.
inline bool unaryOpOf(const std::string &op, const std::string &approximate, UnaryOp &out) {
  static const std::pair<const char *, UnaryOp> kOps[] = {
      {"Relu", UnaryOp::kRelu},
      {"Sigmoid", UnaryOp::kSigmoid},
      {"Tanh", UnaryOp::kTanh},
      {"Sqrt", UnaryOp::kSqrt},
      {"Exp", UnaryOp::kExp},
      {"Log", UnaryOp::kLog},
      {"Abs", UnaryOp::kAbs},
      {"LeakyRelu", UnaryOp::kLeakyRelu},
      {"HardSwish", UnaryOp::kHardSwish},
      {"Neg", UnaryOp::kNeg},
      {"Reciprocal", UnaryOp::kReciprocal},
      {"Erf", UnaryOp::kErf},
      {"HardSigmoid", UnaryOp::kHardSigmoid},
      {"Floor", UnaryOp::kFloor},
      {"Ceil", UnaryOp::kCeil},
      {"Round", UnaryOp::kRound},
      {"Sign", UnaryOp::kSign},
      {"Softplus", UnaryOp::kSoftplus},
      {"Softsign", UnaryOp::kSoftsign},
      {"Elu", UnaryOp::kElu},
      {"Selu", UnaryOp::kSelu},
      {"Celu", UnaryOp::kCelu},
      {"Mish", UnaryOp::kMish},
      {"Sin", UnaryOp::kSin},
      {"Cos", UnaryOp::kCos},
      {"Clip", UnaryOp::kClip},
  };
  if (op == "Gelu") {
    out = approximate == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf;
    return true;
  }
  for (const auto &[name, value] : kOps)
    if (op == name) {
      out = value;
      return true;
    }
  return false;
}

/// The attributes of a unary op as unaryF32's alpha and beta, with the ONNX operator text's
/// defaults (as the CPU kernels): LeakyRelu alpha 0.01; Elu, Celu alpha 1; HardSigmoid alpha
/// 0.2, beta 0.5; Selu alpha 1.6732632, gamma 1.0507010 (in beta). Clip's bounds are inputs.
inline void unaryAttrs(const KernelSpec &spec, UnaryOp op, float &alpha, float &beta) {
  alpha = beta = 0.f;
  switch (op) {
  case UnaryOp::kLeakyRelu:
    alpha = spec.attrFloat("alpha", 0.01f);
    break;
  case UnaryOp::kElu:
  case UnaryOp::kCelu:
    alpha = spec.attrFloat("alpha", 1.f);
    break;
  case UnaryOp::kHardSigmoid:
    alpha = spec.attrFloat("alpha", 0.2f);
    beta = spec.attrFloat("beta", 0.5f);
    break;
  case UnaryOp::kSelu:
    alpha = spec.attrFloat("alpha", 1.67326319217681884765625f);
    beta = spec.attrFloat("gamma", 1.05070102214813232421875f);
    break;
  default:
    break;
  }
}

/// log(1 + e^x) without overflow (the CPU's Softplus loop).
DTC_HD float softplusF(float x) { return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

/// y = op(x) for f32. alpha/beta: LeakyRelu alpha; Elu alpha; HardSigmoid alpha, beta; Selu
/// alpha, gamma (in beta); Celu alpha; Clip min, max (already defaulted to -inf/+inf). NaN in
/// gives NaN out for every op (Relu: NaN < 0 is false, so NaN is kept).
DTC_HD float unaryF32(UnaryOp op, float x, float alpha, float beta) {
  switch (op) {
  case UnaryOp::kRelu:
    return x < 0.f ? 0.f : x;
  case UnaryOp::kSigmoid:
    return 1.f / (1.f + expf(-x));
  case UnaryOp::kTanh:
    return tanhf(x);
  case UnaryOp::kSqrt:
    return sqrtf(x);
  case UnaryOp::kExp:
    return expf(x);
  case UnaryOp::kLog:
    return logf(x);
  case UnaryOp::kAbs:
    return fabsf(x);
  case UnaryOp::kLeakyRelu: // x > 0 ? x : alpha x; alpha 0 is Relu (-inf gives 0, NaN stays)
    return x > 0.f ? x : (alpha == 0.f ? (x < 0.f ? 0.f : x) : alpha * x);
  case UnaryOp::kHardSwish: { // x * relu6(x + 3) / 6
    float v = x + 3.f;
    v = v < 0.f ? 0.f : v;
    v = v > 6.f ? 6.f : v;
    return x * v / 6.f;
  }
  case UnaryOp::kGeluErf: // 0.5 x (1 + erf(x / sqrt(2)))
    return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
  case UnaryOp::kGeluTanh: { // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const float k = 0.79788456080286536f;
    return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
  }
  case UnaryOp::kNeg:
    return -x;
  case UnaryOp::kReciprocal:
    return 1.f / x;
  case UnaryOp::kErf:
    return erff(x);
  case UnaryOp::kHardSigmoid: { // max(0, min(1, alpha x + beta)); NaN stays NaN
    float v = alpha * x + beta;
    v = 1.f < v ? 1.f : v;
    return v < 0.f ? 0.f : v;
  }
  case UnaryOp::kFloor:
    return floorf(x);
  case UnaryOp::kCeil:
    return ceilf(x);
  case UnaryOp::kRound: // halves to even
    return rintf(x);
  case UnaryOp::kSign:
    return x != x ? x : static_cast<float>((x > 0.f) - (x < 0.f));
  case UnaryOp::kSoftplus:
    return softplusF(x);
  case UnaryOp::kSoftsign:
    return x / (1.f + fabsf(x));
  case UnaryOp::kElu:
    return x > 0.f ? x : alpha * expm1f(x);
  case UnaryOp::kSelu: // gamma (x > 0 ? x : alpha (e^x - 1)); gamma is beta
    return beta * (x > 0.f ? x : alpha * expm1f(x));
  case UnaryOp::kCelu:
    return x > 0.f ? x : alpha * expm1f(x / alpha);
  case UnaryOp::kMish:
    return x * tanhf(softplusF(x));
  case UnaryOp::kSin:
    return sinf(x);
  case UnaryOp::kCos:
    return cosf(x);
  case UnaryOp::kClip: { // Min(max, Max(x, min)): min > max gives max; NaN stays NaN
    float v = x < alpha ? alpha : x;
    return beta < v ? beta : v;
  }
  }
  return x;
}

/// The i64 forms: Neg and Abs wrap like two's complement (INT64_MIN stays), Sign, Clip (alpha,
/// beta are the bounds).
DTC_HD int64_t unaryI64(UnaryOp op, int64_t x, int64_t lo, int64_t hi) {
  if (op == UnaryOp::kClip) {
    int64_t v = x < lo ? lo : x;
    return hi < v ? hi : v;
  }
  if (op == UnaryOp::kSign)
    return (x > 0) - (x < 0);
  const uint64_t u = static_cast<uint64_t>(x);
  const bool negate = op == UnaryOp::kNeg || x < 0;
  return static_cast<int64_t>(negate ? 0 - u : u);
}

// ---------------------------------------------------------------------------------------------
// ai.dtc.EltwiseGrad (formulas: ops/training/ActivationGradOps.cpp) and ClipGrad.

enum class GradAlg : int32_t {
  kRelu,
  kReluDst,
  kLogisticDst,
  kTanhDst,
  kExpDst,
  kSqrtDst,
  kReciprocalDst,
  kLog,
  kAbs,
  kErf,
  kGeluErf,
  kGeluTanh,
  kHardSwish,
  kHardSigmoid,
  kSoftRelu,
  kSoftsign,
  kElu,
  kSelu,
  kCelu,
  kMish,
  kSin,
  kCos,
};

/// The `algorithm` attribute as a GradAlg; false for an unknown name.
inline bool gradAlgOf(const std::string &name, GradAlg &out) {
  static const std::pair<const char *, GradAlg> kAlgs[] = {
      {"relu", GradAlg::kRelu},
      {"relu_dst", GradAlg::kReluDst},
      {"logistic_dst", GradAlg::kLogisticDst},
      {"tanh_dst", GradAlg::kTanhDst},
      {"exp_dst", GradAlg::kExpDst},
      {"sqrt_dst", GradAlg::kSqrtDst},
      {"reciprocal_dst", GradAlg::kReciprocalDst},
      {"log", GradAlg::kLog},
      {"abs", GradAlg::kAbs},
      {"erf", GradAlg::kErf},
      {"gelu_erf", GradAlg::kGeluErf},
      {"gelu_tanh", GradAlg::kGeluTanh},
      {"hardswish", GradAlg::kHardSwish},
      {"hardsigmoid", GradAlg::kHardSigmoid},
      {"soft_relu", GradAlg::kSoftRelu},
      {"softsign", GradAlg::kSoftsign},
      {"elu", GradAlg::kElu},
      {"selu", GradAlg::kSelu},
      {"celu", GradAlg::kCelu},
      {"mish", GradAlg::kMish},
      {"sin", GradAlg::kSin},
      {"cos", GradAlg::kCos},
  };
  for (const auto &[n, a] : kAlgs)
    if (name == n) {
      out = a;
      return true;
    }
  return false;
}

/// dX = dY * f'(.) where t is the forward input X, or the forward output Y for the *_dst forms.
DTC_HD float eltwiseGradF32(GradAlg alg, float dy, float t, float alpha, float beta) {
  switch (alg) {
  case GradAlg::kRelu:
  case GradAlg::kReluDst:
    return t > 0.f ? dy : alpha * dy;
  case GradAlg::kLogisticDst:
    return dy * t * (1.f - t);
  case GradAlg::kTanhDst:
    return dy * (1.f - t * t);
  case GradAlg::kExpDst:
    return dy * t;
  case GradAlg::kSqrtDst:
    return dy / (2.f * t);
  case GradAlg::kReciprocalDst:
    return -dy * (t * t);
  case GradAlg::kLog:
    return dy / t;
  case GradAlg::kAbs:
    return t > 0.f ? dy : (t < 0.f ? -dy : 0.f);
  case GradAlg::kErf:
    return dy * 1.1283791670955126f * expf(-t * t);
  case GradAlg::kGeluErf: { // Phi(x) + x phi(x)
    const float cdf = 0.5f * (1.f + erff(t * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * expf(-0.5f * t * t);
    return dy * (cdf + t * pdf);
  }
  case GradAlg::kGeluTanh: {
    const float k = 0.79788456080286536f, c = 0.044715f;
    const float th = tanhf(k * (t + c * t * t * t));
    const float dinner = k * (1.f + 3.f * c * t * t);
    return dy * (0.5f * (1.f + th) + 0.5f * t * (1.f - th * th) * dinner);
  }
  case GradAlg::kHardSwish:
    return t < -3.f ? 0.f : (t <= 3.f ? dy * (t / 3.f + 0.5f) : dy);
  case GradAlg::kHardSigmoid: {
    const float v = alpha * t + beta;
    return v > 0.f && v < 1.f ? alpha * dy : 0.f;
  }
  case GradAlg::kSoftRelu:
    return dy / (1.f + expf(-t));
  case GradAlg::kSoftsign: {
    const float d = 1.f + fabsf(t);
    return dy / (d * d);
  }
  case GradAlg::kElu:
    return t > 0.f ? dy : alpha * expf(t) * dy;
  case GradAlg::kSelu:
    return t > 0.f ? beta * dy : beta * alpha * expf(t) * dy;
  case GradAlg::kCelu:
    return t > 0.f ? dy : expf(t / alpha) * dy;
  case GradAlg::kMish: {
    const float th = tanhf(softplusF(t));
    const float sg = 1.f / (1.f + expf(-t));
    return dy * (th + t * sg * (1.f - th * th));
  }
  case GradAlg::kSin:
    return dy * cosf(t);
  case GradAlg::kCos:
    return -dy * sinf(t);
  }
  return dy;
}

/// ClipGrad: lo <= x <= hi ? dy : 0 (NaN x gives 0).
DTC_HD float clipGradF32(float dy, float x, float lo, float hi) {
  return x >= lo && x <= hi ? dy : 0.f;
}

// ---------------------------------------------------------------------------------------------
// Binary arithmetic, comparisons, variadic combination.

enum class BinaryOp : int32_t { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kPRelu };

DTC_HD float binaryF32(BinaryOp op, float x, float y) {
  switch (op) {
  case BinaryOp::kAdd:
    return x + y;
  case BinaryOp::kSub:
    return x - y;
  case BinaryOp::kMul:
    return x * y;
  case BinaryOp::kDiv:
    return x / y;
  case BinaryOp::kPow: // x*x is pow(x, 2) exactly (both correctly rounded)
    return y == 2.f ? x * x : powf(x, y);
  case BinaryOp::kMax: // NaN wins (np.maximum)
    return (x != x || y != y) ? x + y : (y > x ? y : x);
  case BinaryOp::kMin:
    return (x != x || y != y) ? x + y : (y < x ? y : x);
  case BinaryOp::kPRelu: // y is the slope
    return x > 0.f ? x : y * x;
  }
  return x;
}

/// i64 arithmetic wrapping like two's complement; Div truncates toward zero and INT64_MIN / -1
/// gives INT64_MIN. A zero divisor must be caught by the caller (it returns 0 here).
DTC_HD int64_t binaryI64(BinaryOp op, int64_t x, int64_t y) {
  using U = uint64_t;
  switch (op) {
  case BinaryOp::kAdd:
    return static_cast<int64_t>(U(x) + U(y));
  case BinaryOp::kSub:
    return static_cast<int64_t>(U(x) - U(y));
  case BinaryOp::kMul:
    return static_cast<int64_t>(U(x) * U(y));
  case BinaryOp::kDiv:
    if (y == 0)
      return 0;
    if (x == INT64_MIN && y == -1)
      return x;
    return x / y;
  case BinaryOp::kMax:
    return y > x ? y : x;
  case BinaryOp::kMin:
    return y < x ? y : x;
  case BinaryOp::kPow:
  case BinaryOp::kPRelu:
    break;
  }
  return x;
}

/// Pow with an i64 exponent: |x| ** e in double, negated for a negative base (or -0) and an odd
/// exponent (the CPU's PowKernel).
DTC_HD float powIntExponent(float x, int64_t e) {
  const double mag = pow(fabs(static_cast<double>(x)), static_cast<double>(e));
  const bool odd = (e & 1) != 0;
  return static_cast<float>(signBitF(x) && odd ? -mag : mag);
}

/// Mod: C fmod for f32 (ONNX requires fmod = 1 for floats); for integers the divisor's sign
/// (fmod = 0, Python's %) or the dividend's (fmod = 1). A zero divisor must be caught by the
/// caller (it returns 0 here); x % -1 is 0 (no INT_MIN / -1 trap).
template <typename T> DTC_HD T modValue(T x, T y, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) {
    (void)fmod;
    return fmodf(x, y);
  } else {
    if (y == 0)
      return 0;
    T r = y == -1 ? T{0} : static_cast<T>(x % y);
    if (!fmod && r != 0 && ((r < 0) != (y < 0)))
      r = static_cast<T>(r + y);
    return r;
  }
}

enum class CompareOp : int32_t { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

/// Comparisons with NaN are false (Equal too), as IEEE and the CPU kernels.
template <typename T> DTC_HD bool compareValues(CompareOp op, T x, T y) {
  switch (op) {
  case CompareOp::kEqual:
    return x == y;
  case CompareOp::kLess:
    return x < y;
  case CompareOp::kGreater:
    return x > y;
  case CompareOp::kLessOrEqual:
    return x <= y;
  case CompareOp::kGreaterOrEqual:
    return x >= y;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin (the CPU's ArgReduce.cpp, numpy): the index along a line of n elements (stride
// `stride`) of the best one, the first on ties (the last with select_last_index), a NaN winning
// over numbers (the first NaN stays).

template <typename T>
DTC_HD int64_t argReduceLine(const T *line, int64_t n, int64_t stride, bool isMax, bool last) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j) {
    const T a = line[j * stride], b = line[best * stride];
    bool better = (isMax ? a > b : a < b) || (last && a == b);
    if constexpr (std::is_floating_point_v<T>) {
      if (b != b)
        continue;
      better = better || a != a;
    }
    if (better)
      best = j;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Broadcasting: N operands read as the output's shape, dims collapsed (size-1 dims dropped,
// neighbours merged where every operand is contiguous or broadcast across both).

constexpr int kMaxDims = 8;

template <int N> struct Broadcast {
  int rank = 0;                      ///< collapsed output rank (0: a single element)
  int64_t dims[kMaxDims] = {};       ///< collapsed output dims
  int64_t strides[N][kMaxDims] = {}; ///< element strides per operand (0: broadcast)
  bool flat[N] = {};                 ///< operand k has the output's shape: index = o

  /// Element index of operand k for output element o (row-major).
  DTC_HD int64_t index(int k, int64_t o) const {
    if (flat[k])
      return o;
    int64_t idx = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = o / dims[d];
      idx += (o - q * dims[d]) * strides[k][d];
      o = q;
    }
    return idx;
  }
};

/// Builds the collapsed broadcast of `ins` (each broadcastable to `out`, as the CPU check
/// proved). False when more than kMaxDims dims remain after collapsing.
template <int N>
bool makeBroadcast(const std::vector<int64_t> &out, const std::vector<std::vector<int64_t>> &ins,
                   Broadcast<N> &b) {
  const size_t rank = out.size();
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(N);
  // Row-major strides of each operand padded to the output's rank, 0 along broadcast dims.
  std::vector<std::vector<int64_t>> full(N, std::vector<int64_t>(rank, 0));
  for (int k = 0; k < N; ++k) {
    const std::vector<int64_t> &s = ins[static_cast<size_t>(k)];
    b.flat[k] = s == out;
    int64_t stride = 1;
    for (size_t i = 0; i < rank; ++i) {
      const size_t d = rank - 1 - i;
      const int64_t dim = i < s.size() ? s[s.size() - 1 - i] : 1;
      full[static_cast<size_t>(k)][d] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
  }
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1)
      continue;
    bool merge = !dims.empty();
    for (int k = 0; merge && k < N; ++k)
      merge = strides[static_cast<size_t>(k)].back() == full[static_cast<size_t>(k)][d] * out[d];
    if (merge) {
      dims.back() *= out[d];
      for (int k = 0; k < N; ++k)
        strides[static_cast<size_t>(k)].back() = full[static_cast<size_t>(k)][d];
    } else {
      dims.push_back(out[d]);
      for (int k = 0; k < N; ++k)
        strides[static_cast<size_t>(k)].push_back(full[static_cast<size_t>(k)][d]);
    }
  }
  if (dims.size() > static_cast<size_t>(kMaxDims))
    return false;
  b.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    b.dims[d] = dims[d];
    for (int k = 0; k < N; ++k)
      b.strides[k][d] = strides[static_cast<size_t>(k)][d];
  }
  return true;
}

/// The numpy broadcast shape of all `shapes`; false when they do not broadcast.
inline bool broadcastShape(const std::vector<std::vector<int64_t>> &shapes,
                           std::vector<int64_t> &out) {
  out.clear();
  for (const std::vector<int64_t> &s : shapes) {
    std::vector<int64_t> next(std::max(out.size(), s.size()), 1);
    for (size_t i = 0; i < next.size(); ++i) {
      const int64_t a = i < out.size() ? out[out.size() - 1 - i] : 1;
      const int64_t c = i < s.size() ? s[s.size() - 1 - i] : 1;
      if (a != c && a != 1 && c != 1)
        return false;
      next[next.size() - 1 - i] = a == 1 ? c : a;
    }
    out = std::move(next);
  }
  return true;
}

/// Reports error site `site` (first one wins) to the context's error slot (on the host: the
/// slot is a plain int, for the tests of the host path).
DTC_HD void reportError(int *slot, int site) {
#ifdef __CUDA_ARCH__
  atomicCAS(slot, 0, site);
#else
  if (*slot == 0)
    *slot = site;
#endif
}

} // namespace dtc::ops::cuda

#ifdef __CUDACC__
#include <cuda_runtime.h>

namespace dtc::ops::cuda {

constexpr int kBlock = 256;

/// Blocks for a grid-stride loop over n elements (at least 1, at most 2^16 blocks: enough to
/// fill any current GPU; each thread then loops).
inline unsigned gridFor(int64_t n, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  if (blocks < 1)
    blocks = 1;
  if (blocks > 65536)
    blocks = 65536;
  return static_cast<unsigned>(blocks);
}

/// The first element and the stride of a grid-stride loop (int64: sizes may pass 2^31).
__device__ inline int64_t gridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t gridStride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

/// Block-wide sum in double (blockDim.x == kBlock); every thread gets the result.
__device__ inline double blockSum(double v, double *scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int k = kBlock / 2; k > 0; k /= 2) {
    if (static_cast<int>(threadIdx.x) < k)
      scratch[threadIdx.x] += scratch[threadIdx.x + k];
    __syncthreads();
  }
  const double r = scratch[0];
  __syncthreads();
  return r;
}

/// Block-wide max of floats (NaN ignored, as std::max from -inf on the CPU).
__device__ inline float blockMax(float v, float *scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int k = kBlock / 2; k > 0; k /= 2) {
    if (static_cast<int>(threadIdx.x) < k) {
      const float o = scratch[threadIdx.x + k];
      scratch[threadIdx.x] = scratch[threadIdx.x] < o ? o : scratch[threadIdx.x];
    }
    __syncthreads();
  }
  const float r = scratch[0];
  __syncthreads();
  return r;
}

} // namespace dtc::ops::cuda
#endif
