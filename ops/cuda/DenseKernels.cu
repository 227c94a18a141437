// The hand-written CUDA kernels of the dense family (launchers declared in ops/cuda/DenseUtil.h,
// whose __host__ __device__ functions hold the math): Gemm's broadcast of C, pooling and its
// gradients (one thread per output element, grid-stride), softmax rows (one warp per row), batch
// normalization (one block per channel, sums in double), layer normalization (one block per
// row). Every index is int64; every launch is on the caller's stream.
#include "ops/cuda/DenseUtil.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

constexpr int kThreads = kBlockThreads;

/// Blocks for a grid-stride loop over `n` items (at least 1, at most 65535 * 8).
unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, 65535 * 8));
}

int launchError() { return static_cast<int>(cudaGetLastError()); }

__global__ void broadcastCKernel(const float *c, int64_t m, int64_t n, int64_t cm, int64_t cn,
                                 float scale, float *y) {
  int64_t total = m * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = broadcastCAt(c, n, cm, cn, scale, i);
}

__global__ void poolForwardKernel(PoolGeom g, const float *x, float *y) {
  int64_t total = g.planes * g.outSize();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = poolForwardAt(g, x, i);
}

__global__ void poolBackwardKernel(PoolGeom g, const float *dy, const float *x, float *dx) {
  int64_t total = g.planes * g.outSize();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(blockDim.x) * gridDim.x)
    poolBackwardAt(g, dy, x, dx, i);
}

constexpr int kWarpsPerBlock = kThreads / 32;

__global__ void softmaxKernel(SoftmaxArgs a, bool grad) {
  int64_t lane = threadIdx.x % 32, rows = a.outer * a.inner;
  int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32; r < rows; r += warps)
    if (grad)
      softmaxGradRow(a, r, lane, 32);
    else
      softmaxRow(a, r, lane, 32);
}

__global__ void batchNormInferenceKernel(BatchNormArgs a) {
  int64_t total = a.d.batch * a.d.channels * a.d.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(blockDim.x) * gridDim.x)
    batchNormInferenceAt(a, i);
}

__global__ void batchNormKernel(BatchNormArgs a, bool grad) {
  __shared__ double shared[kBlockThreads];
  for (int64_t c = blockIdx.x; c < a.d.channels; c += gridDim.x)
    if (grad)
      batchNormGradChannel(a, c, threadIdx.x, kBlockThreads, shared);
    else
      batchNormTrainingChannel(a, c, threadIdx.x, kBlockThreads, shared);
}

__global__ void layerNormKernel(LayerNormArgs a, bool grad) {
  __shared__ float shared[kBlockThreads];
  for (int64_t r = blockIdx.x; r < a.outer; r += gridDim.x)
    if (grad)
      layerNormGradRow(a, r, threadIdx.x, kBlockThreads, shared);
    else
      layerNormRow(a, r, threadIdx.x, kBlockThreads, shared);
}

__global__ void layerNormGradColumnsKernel(LayerNormArgs a) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < a.inner;
       j += int64_t(blockDim.x) * gridDim.x)
    layerNormGradColumn(a, j);
}

/// Blocks for one block per row or channel.
unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 65535 * 8));
}

unsigned warpBlocks(int64_t rows) {
  int64_t b = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, 65535 * 8));
}

} // namespace

int launchBroadcastC(const GemmPlan &p, const float *c, float scale, float *y,
                     CUstream_st *stream) {
  if (p.m * p.n == 0)
    return 0;
  broadcastCKernel<<<blocksFor(p.m * p.n), kThreads, 0, stream>>>(c, p.m, p.n, p.cm, p.cn, scale,
                                                                  y);
  return launchError();
}

int launchPoolForward(const PoolGeom &g, const float *x, float *y, CUstream_st *stream) {
  int64_t total = g.planes * g.outSize();
  if (total == 0)
    return 0;
  poolForwardKernel<<<blocksFor(total), kThreads, 0, stream>>>(g, x, y);
  return launchError();
}

int launchPoolBackward(const PoolGeom &g, const float *dy, const float *x, float *dx,
                       CUstream_st *stream) {
  int64_t inTotal = g.planes * g.inSize(), total = g.planes * g.outSize();
  if (inTotal == 0)
    return 0;
  cudaError_t e = cudaMemsetAsync(dx, 0, static_cast<size_t>(inTotal) * sizeof(float), stream);
  if (e != cudaSuccess || total == 0)
    return static_cast<int>(e);
  poolBackwardKernel<<<blocksFor(total), kThreads, 0, stream>>>(g, dy, x, dx);
  return launchError();
}

int launchSoftmax(const SoftmaxArgs &a, bool grad, CUstream_st *stream) {
  if (a.outer * a.n * a.inner == 0)
    return 0;
  softmaxKernel<<<warpBlocks(a.outer * a.inner), kThreads, 0, stream>>>(a, grad);
  return launchError();
}

int launchBatchNormInference(const BatchNormArgs &a, CUstream_st *stream) {
  int64_t total = a.d.batch * a.d.channels * a.d.spatial;
  if (total == 0)
    return 0;
  batchNormInferenceKernel<<<blocksFor(total), kThreads, 0, stream>>>(a);
  return launchError();
}

int launchBatchNormTraining(const BatchNormArgs &a, CUstream_st *stream) {
  if (a.d.channels == 0)
    return 0;
  batchNormKernel<<<rowBlocks(a.d.channels), kBlockThreads, 0, stream>>>(a, false);
  return launchError();
}

int launchBatchNormGrad(const BatchNormArgs &a, CUstream_st *stream) {
  if (a.d.channels == 0)
    return 0;
  batchNormKernel<<<rowBlocks(a.d.channels), kBlockThreads, 0, stream>>>(a, true);
  return launchError();
}

int launchLayerNorm(const LayerNormArgs &a, CUstream_st *stream) {
  if (a.outer == 0)
    return 0;
  layerNormKernel<<<rowBlocks(a.outer), kBlockThreads, 0, stream>>>(a, false);
  return launchError();
}

int launchLayerNormGrad(const LayerNormArgs &a, CUstream_st *stream) {
  if (a.inner == 0)
    return 0;
  if (a.outer > 0) {
    layerNormKernel<<<rowBlocks(a.outer), kBlockThreads, 0, stream>>>(a, true);
    int e = launchError();
    if (e != 0)
      return e;
  }
  if (!a.dScale && !a.dB)
    return 0;
  layerNormGradColumnsKernel<<<blocksFor(a.inner), kThreads, 0, stream>>>(a);
  return launchError();
}

} // namespace dtc::ops::cuda
