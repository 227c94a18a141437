// Shared pieces of the dense CUDA kernels (ops/cuda/MatMul.cpp, Conv.cpp, Pool.cpp, Norm.cpp,
// Softmax.cpp, DenseKernels.cu): the math of the hand-written kernels as __host__ __device__
// functions (pooling windows, softmax rows, batch-norm channels, layer-norm rows, Gemm's C), the
// plans of the cuBLAS and cuDNN calls (GemmPlan, ConvPlan) and the launchers. The device kernels
// call these functions; tests/gpu/DenseTest.cpp runs the same functions and plans on the host
// against the CPU kernels, which is what a machine without a GPU can verify. No CUDA header is
// needed: the launchers take a CUstream_st * (cudaStream_t) and return a cudaError_t as int.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#if !defined(__CUDACC__) // the kernel specs stay out of nvcc's translation units
#include "ops/kernel/Kernel.h"
#endif

#if defined(__CUDACC__)
#define DTC_HD __host__ __device__
#else
#define DTC_HD
#endif

struct CUstream_st; // cudaStream_t without <cuda_runtime.h>

namespace dtc::ops::cuda {

/// Pooling over up to three spatial axes (unused trailing axes have size, kernel, stride and
/// dilation 1 and no pads), on `planes` = N * C row-major planes. The window of output o along
/// an axis starts at input o * s - pb and has k positions spaced by d; positions outside
/// [0, in) are padding. The output sizes (ceil_mode included) were checked by the CPU target.
struct PoolGeom {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1},
          d[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
  bool max = false;        ///< MaxPool (else average)
  bool includePad = false; ///< AveragePool count_include_pad=1
  DTC_HD int64_t inSize() const { return in[0] * in[1] * in[2]; }
  DTC_HD int64_t outSize() const { return out[0] * out[1] * out[2]; }
};

/// The kernel positions [jb, je) of the window starting at input `lo` that fall inside [0, in),
/// and the number of positions inside the explicit pads [-pb, in + pe) (count_include_pad's
/// divisor, as onnxruntime: the ceil_mode extension past the end pad is not counted).
struct PoolRange {
  int64_t lo, jb, je, padded;
};
DTC_HD inline PoolRange poolRange(const PoolGeom &g, int a, int64_t o) {
  PoolRange r;
  r.lo = o * g.s[a] - g.pb[a];
  r.jb = r.lo >= 0 ? 0 : (-r.lo + g.d[a] - 1) / g.d[a];
  int64_t je = r.lo > g.in[a] - 1 ? 0 : (g.in[a] - 1 - r.lo) / g.d[a] + 1;
  r.je = je < g.k[a] ? je : g.k[a];
  if (r.je < r.jb)
    r.je = r.jb;
  int64_t last = r.lo + g.d[a] * (g.k[a] - 1);
  if (last > g.in[a] + g.pe[a] - 1)
    last = g.in[a] + g.pe[a] - 1;
  r.padded = (last - r.lo) / g.d[a] + 1;
  return r;
}

/// Output element `index` (in [0, planes * outSize)) of MaxPool / AveragePool: the maximum of
/// the window's elements inside X (NaN when one is NaN, as numpy's max and PyTorch), or their
/// sum divided by the count inside X (count_include_pad=0) or inside the explicit pads (1).
DTC_HD inline float poolForwardAt(const PoolGeom &g, const float *x, int64_t index) {
  int64_t outSize = g.outSize();
  int64_t plane = index / outSize, rem = index % outSize;
  int64_t o2 = rem % g.out[2], o1 = (rem / g.out[2]) % g.out[1], o0 = rem / (g.out[2] * g.out[1]);
  PoolRange r0 = poolRange(g, 0, o0), r1 = poolRange(g, 1, o1), r2 = poolRange(g, 2, o2);
  const float *xp = x + plane * g.inSize();
  float acc = 0.f, nanValue = 0.f;
  bool any = false, nan = false;
  for (int64_t j0 = r0.jb; j0 < r0.je; ++j0)
    for (int64_t j1 = r1.jb; j1 < r1.je; ++j1) {
      const float *row = xp + ((r0.lo + j0 * g.d[0]) * g.in[1] + r1.lo + j1 * g.d[1]) * g.in[2];
      for (int64_t j2 = r2.jb; j2 < r2.je; ++j2) {
        float v = row[r2.lo + j2 * g.d[2]];
        if (g.max) {
          if (v != v) {
            nan = true;
            nanValue = v;
          }
          if (!any || v > acc)
            acc = v;
        } else {
          acc += v;
        }
        any = true;
      }
    }
  if (g.max)
    return nan ? nanValue : acc;
  int64_t div = g.includePad ? r0.padded * r1.padded * r2.padded
                             : (r0.je - r0.jb) * (r1.je - r1.jb) * (r2.je - r2.jb);
  return div > 0 ? acc / static_cast<float>(div) : 0.f;
}

/// Adds `v` to `*p`: atomically on the device (windows overlap), plainly on the host.
DTC_HD inline void poolAdd(float *p, float v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(p, v);
#else
  *p += v;
#endif
}

/// The gradient of output element `index` scattered into dX (zeroed before): MaxPoolGrad adds
/// dY to the first maximal element of the window inside X in row-major window order (a strictly
/// larger value replaces it), as the CPU kernel; AveragePoolGrad adds dY / divisor to each
/// element of the window inside X. `x` is the forward input (MaxPoolGrad only).
DTC_HD inline void poolBackwardAt(const PoolGeom &g, const float *dy, const float *x, float *dx,
                                  int64_t index) {
  int64_t outSize = g.outSize(), inSize = g.inSize();
  int64_t plane = index / outSize, rem = index % outSize;
  int64_t o2 = rem % g.out[2], o1 = (rem / g.out[2]) % g.out[1], o0 = rem / (g.out[2] * g.out[1]);
  PoolRange r0 = poolRange(g, 0, o0), r1 = poolRange(g, 1, o1), r2 = poolRange(g, 2, o2);
  if (r0.jb >= r0.je || r1.jb >= r1.je || r2.jb >= r2.je)
    return; // a window entirely in the pads
  float gy = dy[index];
  float *dxp = dx + plane * inSize;
  if (g.max) {
    const float *xp = x + plane * inSize;
    int64_t best = -1;
    float bestV = 0.f;
    for (int64_t j0 = r0.jb; j0 < r0.je; ++j0)
      for (int64_t j1 = r1.jb; j1 < r1.je; ++j1) {
        int64_t row = ((r0.lo + j0 * g.d[0]) * g.in[1] + r1.lo + j1 * g.d[1]) * g.in[2] + r2.lo;
        for (int64_t j2 = r2.jb; j2 < r2.je; ++j2) {
          int64_t idx = row + j2 * g.d[2];
          float v = xp[idx];
          if (best < 0 || v > bestV) {
            best = idx;
            bestV = v;
          }
        }
      }
    poolAdd(dxp + best, gy);
    return;
  }
  int64_t div = g.includePad ? r0.padded * r1.padded * r2.padded
                             : (r0.je - r0.jb) * (r1.je - r1.jb) * (r2.je - r2.jb);
  float v = gy / static_cast<float>(div);
  for (int64_t j0 = r0.jb; j0 < r0.je; ++j0)
    for (int64_t j1 = r1.jb; j1 < r1.je; ++j1) {
      float *row = dxp + ((r0.lo + j0 * g.d[0]) * g.in[1] + r1.lo + j1 * g.d[1]) * g.in[2] + r2.lo;
      for (int64_t j2 = r2.jb; j2 < r2.je; ++j2)
        poolAdd(row + j2 * g.d[2], v);
    }
}

#if !defined(__CUDACC__)
/// ConvTranspose's begin pads per spatial axis with auto_pad and output_shape resolved as the
/// CPU kernel does (ops/cpu/Deconv.cpp: an even total padding split in halves). The spec passed
/// the CPU target's check. (DenseCheck.cpp)
std::vector<int64_t> convTransposeBeginPads(const KernelSpec &spec);
#endif

/// One strided-batched GEMM call's operand offsets (elements) into A, B and Y.
struct GemmCall {
  int64_t a = 0, b = 0, y = 0;
};

/// A batched row-major product Y[batch..., M, N] = alpha * op(A) op(B) (+ beta * Y): `calls`
/// strided-batched calls (one per outer batch index) of `batch` products each.
struct GemmPlan {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.f;
  int64_t batch = 1;                ///< inner batch count of each call
  int64_t strideA = 0, strideB = 0; ///< inner batch strides (elements; 0 = broadcast)
  std::vector<GemmCall> calls;      ///< one per outer batch index
  /// Gemm's C (input 2, present and beta != 0): [cm, cn] with cm in {1, M}, cn in {1, N},
  /// broadcast into Y before the product, which adds to it with cuBLAS's beta = `beta` (an empty
  /// K leaves beta * C).
  bool hasC = false;
  float beta = 0.f;
  int64_t cm = 1, cn = 1;
};

/// Element i of Y[M, N] = scale * C broadcast, C [cm, cn] (Gemm's C before the product).
DTC_HD inline float broadcastCAt(const float *c, int64_t n, int64_t cm, int64_t cn, float scale,
                                 int64_t i) {
  int64_t r = i / n, col = i % n;
  return scale * c[(cm == 1 ? 0 : r) * cn + (cn == 1 ? 0 : col)];
}

/// The column-major (cuBLAS) form of a GemmPlan's products: Y^T[N, M] = op1(B) op2(A), where a
/// row-major matrix read as column-major is its transpose. gemm(trans1, trans2, rows, cols,
/// depth, alpha, B + call.b, ld1, strideB, A + call.a, ld2, strideA, beta, Y + call.y, ldy,
/// M * N, batch).
struct ColumnMajorGemm {
  bool trans1 = false, trans2 = false; ///< op1 (applied to B), op2 (applied to A)
  int64_t rows = 0, cols = 0, depth = 0, ld1 = 1, ld2 = 1, ldy = 1;
};
inline ColumnMajorGemm columnMajor(const GemmPlan &p) {
  ColumnMajorGemm g;
  g.trans1 = p.transB;
  g.trans2 = p.transA;
  g.rows = p.n;
  g.cols = p.m;
  g.depth = p.k;
  g.ld1 = (p.transB ? p.k : p.n) > 1 ? (p.transB ? p.k : p.n) : 1;
  g.ld2 = (p.transA ? p.m : p.k) > 1 ? (p.transA ? p.m : p.k) : 1;
  g.ldy = p.n > 1 ? p.n : 1;
  return g;
}

/// How a convolution kernel calls cuDNN: forward (Conv, FusedConv), backward data
/// (ConvGradData, and ConvTranspose: the data gradient of the convolution that maps its output
/// back to its input) or backward filter (ConvGradWeight).
enum class ConvKind { kForward, kBackwardData, kBackwardFilter };

/// The cuDNN convolution of a kernel, seen from its forward side: input x [N, C, ...], weights
/// w [M, C/group, k...], output y [N, M, ...] (NCHW; a 1-D convolution gets a trailing unit
/// axis), one pad per spatial axis (the begin pad, for both ends), and where each tensor is
/// among the kernel's operands (id >= 0: input id; id < 0: output -1 - id).
struct ConvPlan {
  ConvKind kind = ConvKind::kForward;
  std::vector<int> x, w, y;
  std::vector<int> pads, strides, dilations;
  int group = 1;
  int xId = 0, wId = 1, yId = -1;
  int bias = -1;        ///< input added per channel to the result (Conv, FusedConv, ConvTranspose)
  int biasChannels = 0; ///< its size (0: none), or the size of ConvGradWeight's dB
  int biasGrad = -1;    ///< ConvGradWeight: the output index of dB (-1: none)
  int z = -1;           ///< FusedConv: the input index of Z (-1: none)
  bool relu = false;    ///< FusedConv activation Relu
};

#if !defined(__CUDACC__)
/// The plan of a MatMul (numpy broadcasting, 1-D operands), ai.dtc.MatMulT or Gemm (C and beta
/// are the kernel's) spec that passed the CPU target's check. Batch dims broadcast with stride
/// 0; adjacent batch dims that one stride describes in A, B and Y are merged; the innermost
/// becomes the strided batch and the outer ones the calls. (DensePlan.cpp)
GemmPlan gemmPlan(const KernelSpec &spec);

/// The pooling geometry of MaxPool / AveragePool / GlobalAveragePool (x: input, y: output) or
/// of their gradients (x: dX's shape, y: dY's shape). (DensePlan.cpp)
PoolGeom poolGeom(const KernelSpec &spec, const std::vector<int64_t> &x,
                  const std::vector<int64_t> &y, bool max, bool global);

/// The plan of a Conv, FusedConv, ConvGradData, ConvGradWeight or ConvTranspose spec that passed
/// the CUDA target's check. (DensePlan.cpp)
ConvPlan convPlan(const KernelSpec &spec);
#endif

// ---------------------------------------------------------------------------------------------
// Rows and channels: one block (or warp) of threads works on one row or channel, each thread on
// the elements t, t + nt, t + 2 nt, ..., combined by a block (warp) sum. On the host the same
// functions run with t = 0, nt = 1, where the sums are the value itself (tests/gpu/DenseTest.cpp).

constexpr int kBlockThreads = 256; ///< threads of the block-per-row/channel kernels

/// The sum of `v` over the block's kBlockThreads threads (`shared`: kBlockThreads values), valid
/// in every thread; `v` on the host.
template <typename T> DTC_HD inline T blockSum(T v, T *shared) {
#if defined(__CUDA_ARCH__)
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlockThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s)
      shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  T total = shared[0];
  __syncthreads();
  return total;
#else
  (void)shared;
  return v;
#endif
}

/// Sum, maximum and "any" over the 32 lanes of a warp (all active); `v` on the host.
DTC_HD inline float warpSum(float v) {
#if defined(__CUDA_ARCH__)
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
#endif
  return v;
}
DTC_HD inline float warpMax(float v) {
#if defined(__CUDA_ARCH__)
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
#endif
  return v;
}
DTC_HD inline bool warpAny(bool v) {
#if defined(__CUDA_ARCH__)
  return __any_sync(0xffffffffu, v) != 0;
#else
  return v;
#endif
}

/// Softmax / LogSoftmax (opset 13: over the middle axis of [outer, n, inner]) and their
/// gradients, row by row (one warp per row on the device).
struct SoftmaxArgs {
  const float *x = nullptr; ///< forward: X; backward: dY
  const float *y = nullptr; ///< backward: the forward output Y
  float *out = nullptr;     ///< forward: Y; backward: dX
  int64_t outer = 1, n = 1, inner = 1;
  bool log = false;
};

/// Row r (of outer * inner): softmax = exp(x - max) / sum(exp(x - max)), log-softmax = x - max -
/// log(sum(exp(x - max))); a row holding NaN gives NaN everywhere in that row (the reference's
/// max and sum are NaN). `lane` / `lanes`: this thread's share of the row.
DTC_HD inline void softmaxRow(const SoftmaxArgs &a, int64_t r, int64_t lane, int64_t lanes) {
  int64_t base = (r / a.inner) * a.n * a.inner + r % a.inner, st = a.inner;
  const float *x = a.x + base;
  float *y = a.out + base;
  float mx = -INFINITY;
  bool nan = false;
  for (int64_t j = lane; j < a.n; j += lanes) {
    float v = x[j * st];
    nan = nan || v != v;
    mx = v > mx ? v : mx;
  }
  mx = warpMax(mx);
  if (warpAny(nan)) {
    for (int64_t j = lane; j < a.n; j += lanes)
      y[j * st] = NAN;
    return;
  }
  float sum = 0.f;
  for (int64_t j = lane; j < a.n; j += lanes)
    sum += expf(x[j * st] - mx);
  sum = warpSum(sum);
  float logSum = logf(sum);
  for (int64_t j = lane; j < a.n; j += lanes) {
    float v = x[j * st] - mx;
    y[j * st] = a.log ? v - logSum : expf(v) / sum;
  }
}

/// Row r of the gradient: softmax dX = Y * (dY - sum(dY * Y)); log-softmax dX = dY - exp(Y) *
/// sum(dY).
DTC_HD inline void softmaxGradRow(const SoftmaxArgs &a, int64_t r, int64_t lane, int64_t lanes) {
  int64_t base = (r / a.inner) * a.n * a.inner + r % a.inner, st = a.inner;
  const float *dy = a.x + base, *y = a.y + base;
  float *dx = a.out + base;
  float sum = 0.f;
  for (int64_t j = lane; j < a.n; j += lanes)
    sum += a.log ? dy[j * st] : dy[j * st] * y[j * st];
  sum = warpSum(sum);
  for (int64_t j = lane; j < a.n; j += lanes) {
    float g = dy[j * st], v = y[j * st];
    dx[j * st] = a.log ? g - expf(v) * sum : v * (g - sum);
  }
}

/// The per-channel view of an (N, C, spatial...) tensor: element (b, c, s) at (b * C + c) * S + s.
struct ChannelDims {
  int64_t batch = 0, channels = 0, spatial = 1;
  /// Element e in [0, batch * spatial) of channel c.
  DTC_HD int64_t at(int64_t c, int64_t e) const {
    return ((e / spatial) * channels + c) * spatial + e % spatial;
  }
};

/// BatchNormalization (inference), BatchNormTraining and BatchNormGrad operands (null: absent).
struct BatchNormArgs {
  ChannelDims d;
  const float *x = nullptr, *dy = nullptr, *scale = nullptr, *bias = nullptr;
  const float *inMean = nullptr, *inVar = nullptr; ///< inference: the statistics used
  const float *mean = nullptr, *var = nullptr;     ///< BatchNormGrad: the saved statistics
  float momentum = 0.9f, eps = 1e-5f;
  float *y = nullptr;                            ///< Y, or dX
  float *runMean = nullptr, *runVar = nullptr;   ///< BatchNormTraining outputs 1, 2
  float *saveMean = nullptr, *saveVar = nullptr; ///< BatchNormTraining outputs 3, 4 (required)
  float *dScale = nullptr, *dB = nullptr;        ///< BatchNormGrad outputs 1, 2
};

/// Element i of inference batch norm: y = (x - mean) * (scale / sqrt(var + eps)) + bias.
DTC_HD inline void batchNormInferenceAt(const BatchNormArgs &a, int64_t i) {
  int64_t c = (i / a.d.spatial) % a.d.channels;
  float k = a.scale[c] / sqrtf(a.inVar[c] + a.eps);
  a.y[i] = (a.x[i] - a.inMean[c]) * k + a.bias[c];
}

/// Channel c of BatchNormTraining (the CPU kernel's conventions, ops/cpu/NNGradNorm.cpp): mean
/// and biased variance in double (two passes), saved as f32; running_mean = in_mean * momentum +
/// mean * (1 - momentum), running_var = in_var * momentum + var * M / (M - 1) * (1 - momentum)
/// (PyTorch's unbiased running variance; var alone for M = 1); Y from the saved f32 statistics.
DTC_HD inline void batchNormTrainingChannel(const BatchNormArgs &a, int64_t c, int64_t t,
                                            int64_t nt, double *shared) {
  const ChannelDims &d = a.d;
  int64_t m = d.batch * d.spatial;
  double count = static_cast<double>(m);
  double s = 0.0;
  for (int64_t e = t; e < m; e += nt)
    s += a.x[d.at(c, e)];
  double mu = blockSum(s, shared) / count;
  double q = 0.0;
  for (int64_t e = t; e < m; e += nt) {
    double v = a.x[d.at(c, e)] - mu;
    q += v * v;
  }
  double var = blockSum(q, shared) / count;
  float meanF = static_cast<float>(mu), varF = static_cast<float>(var);
  if (t == 0) {
    double keep = a.momentum, take = 1.0 - static_cast<double>(a.momentum);
    double unbias = count > 1 ? count / (count - 1) : 1.0;
    a.saveMean[c] = meanF;
    a.saveVar[c] = varF;
    if (a.runMean)
      a.runMean[c] = static_cast<float>(a.inMean[c] * keep + mu * take);
    if (a.runVar)
      a.runVar[c] = static_cast<float>(a.inVar[c] * keep + var * unbias * take);
  }
  float k = static_cast<float>(static_cast<double>(a.scale[c]) /
                               sqrt(static_cast<double>(varF) + static_cast<double>(a.eps)));
  float b = a.bias[c];
  for (int64_t e = t; e < m; e += nt) {
    int64_t i = d.at(c, e);
    a.y[i] = (a.x[i] - meanF) * k + b;
  }
}

/// Channel c of BatchNormGrad (Ioffe & Szegedy 2015, as the CPU kernel): with invstd =
/// 1 / sqrt(var + eps) and the sums sum_dy, sum_dy_xmu in double, dX = scale * invstd * (dY -
/// sum_dy / M - (X - mean) * invstd^2 * sum_dy_xmu / M), dScale = sum_dy_xmu * invstd, dB =
/// sum_dy. dX may overwrite dY: each element is read before the same thread writes it.
DTC_HD inline void batchNormGradChannel(const BatchNormArgs &a, int64_t c, int64_t t, int64_t nt,
                                        double *shared) {
  const ChannelDims &d = a.d;
  int64_t m = d.batch * d.spatial;
  double count = static_cast<double>(m), mu = a.mean[c];
  double sdy = 0.0, sdyx = 0.0;
  for (int64_t e = t; e < m; e += nt) {
    int64_t i = d.at(c, e);
    double g = a.dy[i];
    sdy += g;
    sdyx += g * (a.x[i] - mu);
  }
  sdy = blockSum(sdy, shared);
  sdyx = blockSum(sdyx, shared);
  double is = 1.0 / sqrt(static_cast<double>(a.var[c]) + static_cast<double>(a.eps));
  if (t == 0) {
    if (a.dScale)
      a.dScale[c] = static_cast<float>(sdyx * is);
    if (a.dB)
      a.dB[c] = static_cast<float>(sdy);
  }
  double k = static_cast<double>(a.scale[c]) * is;
  float ka = static_cast<float>(k), kb = static_cast<float>(-k * is * is * sdyx / count);
  float kd = static_cast<float>(-k * sdy / count), mf = a.mean[c];
  for (int64_t e = t; e < m; e += nt) {
    int64_t i = d.at(c, e);
    a.y[i] = ka * a.dy[i] + kb * (a.x[i] - mf) + kd;
  }
}

/// LayerNormalization and LayerNormGrad over the rows of [outer, inner] (null: absent).
struct LayerNormArgs {
  const float *x = nullptr, *dy = nullptr, *scale = nullptr, *bias = nullptr;
  float eps = 1e-5f;
  float *y = nullptr;                       ///< Y, or dX
  float *mean = nullptr, *invStd = nullptr; ///< forward outputs 1, 2
  float *dScale = nullptr, *dB = nullptr;   ///< gradient outputs 1, 2
  float *stats = nullptr; ///< gradient: scratch of 2 * outer floats (each row's mean, invstd)
  int64_t outer = 0, inner = 0;
};

/// A row's mean and 1 / sqrt(biased variance + eps) in float, two passes (NaN for an empty row,
/// as the CPU kernel).
DTC_HD inline void layerNormStats(const LayerNormArgs &a, const float *x, int64_t t, int64_t nt,
                                  float *shared, float &mu, float &is) {
  float s = 0.f;
  for (int64_t j = t; j < a.inner; j += nt)
    s += x[j];
  mu = blockSum(s, shared) / static_cast<float>(a.inner);
  float q = 0.f;
  for (int64_t j = t; j < a.inner; j += nt) {
    float v = x[j] - mu;
    q += v * v;
  }
  is = 1.f / sqrtf(blockSum(q, shared) / static_cast<float>(a.inner) + a.eps);
}

/// Row r of LayerNormalization: y = (x - mean) * invstd * scale + bias.
DTC_HD inline void layerNormRow(const LayerNormArgs &a, int64_t r, int64_t t, int64_t nt,
                                float *shared) {
  const float *x = a.x + r * a.inner;
  float mu, is;
  layerNormStats(a, x, t, nt, shared, mu, is);
  if (t == 0) {
    if (a.mean)
      a.mean[r] = mu;
    if (a.invStd)
      a.invStd[r] = is;
  }
  float *y = a.y + r * a.inner;
  for (int64_t j = t; j < a.inner; j += nt)
    y[j] = (x[j] - mu) * is * a.scale[j] + (a.bias ? a.bias[j] : 0.f);
}

/// Row r of LayerNormGrad's dX: with xhat = (x - mean) * invstd and g = dY * scale,
/// dX = invstd * (g - mean(g) - xhat * mean(g * xhat)); keeps the row's statistics in `stats`.
DTC_HD inline void layerNormGradRow(const LayerNormArgs &a, int64_t r, int64_t t, int64_t nt,
                                    float *shared) {
  const float *x = a.x + r * a.inner, *dy = a.dy + r * a.inner;
  float mu, is;
  layerNormStats(a, x, t, nt, shared, mu, is);
  float sg = 0.f, sgx = 0.f;
  for (int64_t j = t; j < a.inner; j += nt) {
    float g = dy[j] * a.scale[j];
    sg += g;
    sgx += g * (x[j] - mu) * is;
  }
  float n = static_cast<float>(a.inner);
  float meanG = blockSum(sg, shared) / n, meanGX = blockSum(sgx, shared) / n;
  if (t == 0) {
    a.stats[2 * r] = mu;
    a.stats[2 * r + 1] = is;
  }
  float *dx = a.y + r * a.inner;
  for (int64_t j = t; j < a.inner; j += nt)
    dx[j] = is * (dy[j] * a.scale[j] - meanG - (x[j] - mu) * is * meanGX);
}

/// Column j of LayerNormGrad's parameter gradients (after every row's statistics are in
/// `stats`): dScale = sum over rows of dY * xhat, dB = sum of dY, in double.
DTC_HD inline void layerNormGradColumn(const LayerNormArgs &a, int64_t j) {
  double ds = 0.0, db = 0.0;
  for (int64_t r = 0; r < a.outer; ++r) {
    float g = a.dy[r * a.inner + j];
    ds += static_cast<double>(g) * ((a.x[r * a.inner + j] - a.stats[2 * r]) * a.stats[2 * r + 1]);
    db += g;
  }
  if (a.dScale)
    a.dScale[j] = static_cast<float>(ds);
  if (a.dB)
    a.dB[j] = static_cast<float>(db);
}

#if !defined(__CUDACC__)
/// The operands of a run as the hand-written kernels' arguments (DensePlan.cpp), for specs that
/// passed the CUDA target's check: Softmax, LogSoftmax and their gradients; BatchNormalization,
/// BatchNormTraining (`scratch`: 2 * C floats for the saved statistics the node does not
/// output), BatchNormGrad; LayerNormalization, LayerNormGrad (`scratch`: 2 * outer floats).
SoftmaxArgs softmaxArgs(const KernelSpec &spec, const KernelArgs &args);
BatchNormArgs batchNormArgs(const KernelSpec &spec, const KernelArgs &args, float *scratch);
LayerNormArgs layerNormArgs(const KernelSpec &spec, const KernelArgs &args, float *scratch);
#endif

// ---------------------------------------------------------------------------------------------
// Launchers of the hand-written kernels (DenseKernels.cu). Each enqueues on `stream` and returns
// the launch's cudaError_t as an int (0 = success) so that this header needs no CUDA header.

/// Y = scale * broadcast(C) (broadcastCAt).
int launchBroadcastC(const GemmPlan &p, const float *c, float scale, float *y, CUstream_st *stream);
/// Every output of a pooling (poolForwardAt).
int launchPoolForward(const PoolGeom &g, const float *x, float *y, CUstream_st *stream);
/// dX (zeroed first, stream-ordered) from dY (poolBackwardAt).
int launchPoolBackward(const PoolGeom &g, const float *dy, const float *x, float *dx,
                       CUstream_st *stream);
/// softmaxRow (grad = false) or softmaxGradRow for every row, one warp per row.
int launchSoftmax(const SoftmaxArgs &a, bool grad, CUstream_st *stream);
/// batchNormInferenceAt for every element.
int launchBatchNormInference(const BatchNormArgs &a, CUstream_st *stream);
/// batchNormTrainingChannel / batchNormGradChannel for every channel, one block per channel.
int launchBatchNormTraining(const BatchNormArgs &a, CUstream_st *stream);
int launchBatchNormGrad(const BatchNormArgs &a, CUstream_st *stream);
/// layerNormRow for every row (one block per row).
int launchLayerNorm(const LayerNormArgs &a, CUstream_st *stream);
/// layerNormGradRow for every row (one block per row), then layerNormGradColumn for every
/// column when dScale or dB is wanted.
int launchLayerNormGrad(const LayerNormArgs &a, CUstream_st *stream);

} // namespace dtc::ops::cuda
