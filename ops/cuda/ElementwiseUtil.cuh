// Shared helpers of the hand-written CUDA kernels (elementwise, reductions, losses, optimizers):
// the per-element math as __host__ __device__ functions (the formulas of the CPU kernels in
// ops/cpu/Unary.cpp, Eltwise.cpp, Binary.cpp, ActivationGradEltwise.cpp, Optimizer.cpp, with the
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

namespace dtc::ops::cuda {

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
