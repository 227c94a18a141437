// Shared pieces of the dense CUDA kernels (ops/cuda/MatMul.cpp, Conv.cpp, Pool.cpp, Norm.cpp,
// Softmax.cpp, DenseKernels.cu): the window geometry of pooling with its per-element math as
// __host__ __device__ functions (the device kernels call them; tests/gpu/DenseTest.cpp runs the
// same functions on the host against the CPU kernels, which is what a machine without a GPU can
// verify), and the launchers of the hand-written kernels in DenseKernels.cu. Pure C++ for a
// host compiler: nothing here needs the CUDA headers except the launchers' cudaStream_t.
#pragma once

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

/// ConvTranspose's begin pads per spatial axis with auto_pad and output_shape resolved as the
/// CPU kernel does (ops/cpu/Deconv.cpp: an even total padding split in halves). The spec passed
/// the CPU target's check. (DenseCheck.cpp)

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
};

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

#if !defined(__CUDACC__)
/// The plan of a MatMul (numpy broadcasting, 1-D operands), ai.dtc.MatMulT or Gemm (C and beta
/// are the kernel's) spec that passed the CPU target's check. Batch dims broadcast with stride
/// 0; adjacent batch dims that one stride describes in A, B and Y are merged; the innermost
/// becomes the strided batch and the outer ones the calls. (DenseCheck.cpp)
GemmPlan gemmPlan(const KernelSpec &spec);

/// The pooling geometry of MaxPool / AveragePool / GlobalAveragePool (x: input, y: output) or
/// of their gradients (x: dX's shape, y: dY's shape). (DenseCheck.cpp)
PoolGeom poolGeom(const KernelSpec &spec, const std::vector<int64_t> &x,
                  const std::vector<int64_t> &y, bool max, bool global);
#endif

// ---------------------------------------------------------------------------------------------
// Launchers of the hand-written kernels (DenseKernels.cu). Each enqueues on `stream` and returns
// the launch's cudaError_t as an int (0 = success) so that this header needs no CUDA header.

/// y[m, n] = scale * c[m % cm, n % cn] with cm in {1, M}, cn in {1, N} (Gemm's C broadcast).
int launchBroadcast2D(float *y, const float *c, int64_t m, int64_t n, int64_t cm, int64_t cn,
                      float scale, CUstream_st *stream);
/// Every output of a pooling (poolForwardAt).
int launchPoolForward(const PoolGeom &g, const float *x, float *y, CUstream_st *stream);
/// dX (zeroed first, stream-ordered) from dY (poolBackwardAt).
int launchPoolBackward(const PoolGeom &g, const float *dy, const float *x, float *dx,
                       CUstream_st *stream);

/// Softmax / LogSoftmax over the middle axis of [outer, n, inner] (opset-13 semantics): one warp
/// per (outer, inner) row; a row holding NaN gives NaN everywhere in that row.
int launchSoftmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, bool log,
                  CUstream_st *stream);
/// Their backward from dY and the forward output Y: softmax dX = Y * (dY - sum(dY * Y)),
/// log-softmax dX = dY - exp(Y) * sum(dY).
int launchSoftmaxGrad(const float *dy, const float *y, float *dx, int64_t outer, int64_t n,
                      int64_t inner, bool log, CUstream_st *stream);

/// The per-channel view of an (N, C, spatial...) tensor: element (b, c, s) at (b * C + c) * S + s.
struct ChannelDims {
  int64_t batch = 0, channels = 0, spatial = 1;
};
/// BatchNormalization inference: y = scale * (x - mean) / sqrt(var + eps) + bias per channel.
int launchBatchNormInference(const ChannelDims &d, const float *x, const float *scale,
                             const float *bias, const float *mean, const float *var, float eps,
                             float *y, CUstream_st *stream);
/// BatchNormTraining (one block per channel, statistics in double as the CPU kernel): saved
/// mean and biased variance (mean, var: required), running statistics runMean = inMean * momentum
/// + mean * (1 - momentum), runVar = inVar * momentum + var * M / (M - 1) * (1 - momentum)
/// (either may be null), y from the f32 saved statistics.
int launchBatchNormTraining(const ChannelDims &d, const float *x, const float *scale,
                            const float *bias, const float *inMean, const float *inVar,
                            float momentum, float eps, float *y, float *runMean, float *runVar,
                            float *mean, float *var, CUstream_st *stream);
/// BatchNormGrad from the saved statistics (one block per channel, sums in double):
/// dX = scale * invstd * (dY - sum_dy / M - (X - mean) * invstd^2 * sum_dy_xmu / M),
/// dScale = sum_dy_xmu * invstd, dB = sum_dy (dScale, dB may be null; dx may alias dy).
int launchBatchNormGrad(const ChannelDims &d, const float *dy, const float *x, const float *scale,
                        const float *mean, const float *var, float eps, float *dx, float *dScale,
                        float *dB, CUstream_st *stream);

/// LayerNormalization over the rows of [outer, inner] (one block per row, two passes):
/// y = (x - mean) * invstd * scale + bias with invstd = 1 / sqrt(var + eps), var biased; scale and
/// bias (may be null) have `inner` elements; mean and invStd (either may be null) get one value
/// per row (NaN for an empty row, as the CPU kernel).
int launchLayerNorm(const float *x, const float *scale, const float *bias, float eps, float *y,
                    float *mean, float *invStd, int64_t outer, int64_t inner, CUstream_st *stream);
/// LayerNormGrad (dY, X, Scale -> dX, dScale, dB?): per row, with xhat = (x - mean) * invstd and
/// g = dY * scale, dX = invstd * (g - mean(g) - xhat * mean(g * xhat)); per column, dScale =
/// sum(dY * xhat) and dB = sum(dY) over the rows (in double). `stats` is device scratch of
/// 2 * outer floats (the rows' mean and invstd).
int launchLayerNormGrad(const float *dy, const float *x, const float *scale, float eps, float *dx,
                        float *dScale, float *dB, float *stats, int64_t outer, int64_t inner,
                        CUstream_st *stream);

} // namespace dtc::ops::cuda
