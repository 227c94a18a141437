// The hand-written CUDA kernels of the dense family (declared in ops/cuda/DenseUtil.h): Gemm's
// broadcast of C, pooling and its gradients (the window math of DenseUtil.h, one thread per
// output element, grid-stride), softmax rows (one warp per row), batch normalization (one block
// per channel, sums in double). Every index is int64; every launch is on the caller's stream.
#include "ops/cuda/DenseUtil.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over `n` items (at least 1, at most 65535 * 8).
unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, 65535 * 8));
}

int launchError() { return static_cast<int>(cudaGetLastError()); }

__global__ void broadcast2DKernel(float *y, const float *c, int64_t m, int64_t n, int64_t cm,
                                  int64_t cn, float scale) {
  int64_t total = m * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t r = i / n, col = i % n;
    y[i] = scale * c[(cm == 1 ? 0 : r) * cn + (cn == 1 ? 0 : col)];
  }
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

__device__ float warpMax(float v) {
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ float warpSum(float v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ bool warpAny(bool v) { return __any_sync(0xffffffffu, v) != 0; }

constexpr int kWarpsPerBlock = kThreads / 32;

/// Row r of [outer, n, inner]: its first element and the stride along the axis.
__device__ int64_t rowBase(int64_t r, int64_t n, int64_t inner) {
  return (r / inner) * n * inner + r % inner;
}

__global__ void softmaxKernel(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                              bool log) {
  int lane = threadIdx.x % 32;
  int64_t rows = outer * inner;
  int64_t warp = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = warp; r < rows; r += warps) {
    const float *xr = x + rowBase(r, n, inner);
    float *yr = y + rowBase(r, n, inner);
    float mx = -INFINITY;
    bool nan = false;
    for (int64_t j = lane; j < n; j += 32) {
      float v = xr[j * inner];
      nan = nan || v != v;
      mx = fmaxf(mx, v);
    }
    mx = warpMax(mx);
    if (warpAny(nan)) { // the reference's max and sum are NaN: the whole row is NaN
      for (int64_t j = lane; j < n; j += 32)
        yr[j * inner] = NAN;
      continue;
    }
    float sum = 0.f;
    for (int64_t j = lane; j < n; j += 32)
      sum += expf(xr[j * inner] - mx);
    sum = warpSum(sum);
    float logSum = logf(sum);
    for (int64_t j = lane; j < n; j += 32) {
      float v = xr[j * inner] - mx;
      yr[j * inner] = log ? v - logSum : expf(v) / sum;
    }
  }
}

__global__ void softmaxGradKernel(const float *dy, const float *y, float *dx, int64_t outer,
                                  int64_t n, int64_t inner, bool log) {
  int lane = threadIdx.x % 32;
  int64_t rows = outer * inner;
  int64_t warp = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = warp; r < rows; r += warps) {
    int64_t base = rowBase(r, n, inner);
    const float *dyr = dy + base, *yr = y + base;
    float *dxr = dx + base;
    float sum = 0.f;
    for (int64_t j = lane; j < n; j += 32)
      sum += log ? dyr[j * inner] : dyr[j * inner] * yr[j * inner];
    sum = warpSum(sum);
    for (int64_t j = lane; j < n; j += 32) {
      float g = dyr[j * inner], v = yr[j * inner];
      dxr[j * inner] = log ? g - expf(v) * sum : v * (g - sum);
    }
  }
}

__global__ void batchNormInferenceKernel(ChannelDims d, const float *x, const float *scale,
                                         const float *bias, const float *mean, const float *var,
                                         float eps, float *y) {
  int64_t total = d.batch * d.channels * d.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t c = (i / d.spatial) % d.channels;
    float a = scale[c] / sqrtf(var[c] + eps);
    y[i] = (x[i] - mean[c]) * a + bias[c];
  }
}

/// The sum of `v` over the block (kThreads threads), valid in every thread.
__device__ double blockSum(double v, double *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s)
      shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  double total = shared[0];
  __syncthreads();
  return total;
}

/// Element e in [0, batch * spatial) of channel c.
__device__ int64_t channelElement(const ChannelDims &d, int64_t c, int64_t e) {
  return ((e / d.spatial) * d.channels + c) * d.spatial + e % d.spatial;
}

__global__ void batchNormTrainingKernel(ChannelDims d, const float *x, const float *scale,
                                        const float *bias, const float *inMean, const float *inVar,
                                        float momentum, float eps, float *y, float *runMean,
                                        float *runVar, float *mean, float *var) {
  __shared__ double shared[kThreads];
  int64_t m = d.batch * d.spatial;
  double count = static_cast<double>(m);
  for (int64_t c = blockIdx.x; c < d.channels; c += gridDim.x) {
    double s = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += kThreads)
      s += x[channelElement(d, c, e)];
    double mu = blockSum(s, shared) / count;
    double q = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
      double t = x[channelElement(d, c, e)] - mu;
      q += t * t;
    }
    double v = blockSum(q, shared) / count;
    float meanF = static_cast<float>(mu), varF = static_cast<float>(v);
    if (threadIdx.x == 0) {
      double keep = momentum, take = 1.0 - static_cast<double>(momentum);
      double unbias = count > 1 ? count / (count - 1) : 1.0;
      mean[c] = meanF;
      var[c] = varF;
      if (runMean)
        runMean[c] = static_cast<float>(inMean[c] * keep + mu * take);
      if (runVar)
        runVar[c] = static_cast<float>(inVar[c] * keep + v * unbias * take);
    }
    float a = static_cast<float>(static_cast<double>(scale[c]) /
                                 sqrt(static_cast<double>(varF) + static_cast<double>(eps)));
    float b = bias[c];
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
      int64_t i = channelElement(d, c, e);
      y[i] = (x[i] - meanF) * a + b;
    }
  }
}

__global__ void batchNormGradKernel(ChannelDims d, const float *dy, const float *x,
                                    const float *scale, const float *mean, const float *var,
                                    float eps, float *dx, float *dScale, float *dB) {
  __shared__ double shared[kThreads];
  int64_t m = d.batch * d.spatial;
  double count = static_cast<double>(m);
  for (int64_t c = blockIdx.x; c < d.channels; c += gridDim.x) {
    double mu = mean[c];
    double sdy = 0.0, sdyx = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
      int64_t i = channelElement(d, c, e);
      double g = dy[i];
      sdy += g;
      sdyx += g * (x[i] - mu);
    }
    sdy = blockSum(sdy, shared);
    sdyx = blockSum(sdyx, shared);
    double is = 1.0 / sqrt(static_cast<double>(var[c]) + static_cast<double>(eps));
    if (threadIdx.x == 0) {
      if (dScale)
        dScale[c] = static_cast<float>(sdyx * is);
      if (dB)
        dB[c] = static_cast<float>(sdy);
    }
    double k = static_cast<double>(scale[c]) * is;
    float ka = static_cast<float>(k);
    float kb = static_cast<float>(-k * is * is * sdyx / count);
    float kd = static_cast<float>(-k * sdy / count);
    float mf = mean[c];
    // Each element of dY is read before the same thread writes it in dX (dX may alias dY).
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
      int64_t i = channelElement(d, c, e);
      dx[i] = ka * dy[i] + kb * (x[i] - mf) + kd;
    }
  }
}

/// The sum of `v` over the block (kThreads threads) in float, valid in every thread.
__device__ float blockSumF(float v, float *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s)
      shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  float total = shared[0];
  __syncthreads();
  return total;
}

__global__ void layerNormKernel(const float *x, const float *scale, const float *bias, float eps,
                                float *y, float *mean, float *invStd, int64_t outer,
                                int64_t inner) {
  __shared__ float shared[kThreads];
  for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) {
    const float *xr = x + r * inner;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < inner; j += kThreads)
      s += xr[j];
    float mu = blockSumF(s, shared) / static_cast<float>(inner);
    float q = 0.f;
    for (int64_t j = threadIdx.x; j < inner; j += kThreads) {
      float t = xr[j] - mu;
      q += t * t;
    }
    float is = 1.f / sqrtf(blockSumF(q, shared) / static_cast<float>(inner) + eps);
    if (threadIdx.x == 0) {
      if (mean)
        mean[r] = mu;
      if (invStd)
        invStd[r] = is;
    }
    float *yr = y + r * inner;
    for (int64_t j = threadIdx.x; j < inner; j += kThreads)
      yr[j] = (xr[j] - mu) * is * scale[j] + (bias ? bias[j] : 0.f);
  }
}

__global__ void layerNormGradRowsKernel(const float *dy, const float *x, const float *scale,
                                        float eps, float *dx, float *stats, int64_t outer,
                                        int64_t inner) {
  __shared__ float shared[kThreads];
  float n = static_cast<float>(inner);
  for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) {
    const float *xr = x + r * inner, *dyr = dy + r * inner;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < inner; j += kThreads)
      s += xr[j];
    float mu = blockSumF(s, shared) / n;
    float q = 0.f;
    for (int64_t j = threadIdx.x; j < inner; j += kThreads) {
      float t = xr[j] - mu;
      q += t * t;
    }
    float is = 1.f / sqrtf(blockSumF(q, shared) / n + eps);
    float sg = 0.f, sgx = 0.f;
    for (int64_t j = threadIdx.x; j < inner; j += kThreads) {
      float g = dyr[j] * scale[j];
      sg += g;
      sgx += g * (xr[j] - mu) * is;
    }
    float meanG = blockSumF(sg, shared) / n, meanGX = blockSumF(sgx, shared) / n;
    if (threadIdx.x == 0) {
      stats[2 * r] = mu;
      stats[2 * r + 1] = is;
    }
    float *dxr = dx + r * inner;
    for (int64_t j = threadIdx.x; j < inner; j += kThreads) {
      float xhat = (xr[j] - mu) * is;
      dxr[j] = is * (dyr[j] * scale[j] - meanG - xhat * meanGX);
    }
  }
}

__global__ void layerNormGradParamsKernel(const float *dy, const float *x, const float *stats,
                                          float *dScale, float *dB, int64_t outer, int64_t inner) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < inner;
       j += int64_t(blockDim.x) * gridDim.x) {
    double ds = 0.0, db = 0.0;
    for (int64_t r = 0; r < outer; ++r) {
      float g = dy[r * inner + j];
      ds += static_cast<double>(g) * ((x[r * inner + j] - stats[2 * r]) * stats[2 * r + 1]);
      db += g;
    }
    if (dScale)
      dScale[j] = static_cast<float>(ds);
    if (dB)
      dB[j] = static_cast<float>(db);
  }
}

unsigned channelBlocks(int64_t channels) {
  return static_cast<unsigned>(std::clamp<int64_t>(channels, 1, 65535));
}

unsigned warpBlocks(int64_t rows) {
  int64_t b = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, 65535 * 8));
}

} // namespace

int launchBroadcast2D(float *y, const float *c, int64_t m, int64_t n, int64_t cm, int64_t cn,
                      float scale, CUstream_st *stream) {
  if (m * n == 0)
    return 0;
  broadcast2DKernel<<<blocksFor(m * n), kThreads, 0, stream>>>(y, c, m, n, cm, cn, scale);
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

int launchSoftmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, bool log,
                  CUstream_st *stream) {
  if (outer * n * inner == 0)
    return 0;
  softmaxKernel<<<warpBlocks(outer * inner), kThreads, 0, stream>>>(x, y, outer, n, inner, log);
  return launchError();
}

int launchSoftmaxGrad(const float *dy, const float *y, float *dx, int64_t outer, int64_t n,
                      int64_t inner, bool log, CUstream_st *stream) {
  if (outer * n * inner == 0)
    return 0;
  softmaxGradKernel<<<warpBlocks(outer * inner), kThreads, 0, stream>>>(dy, y, dx, outer, n, inner,
                                                                        log);
  return launchError();
}

int launchBatchNormInference(const ChannelDims &d, const float *x, const float *scale,
                             const float *bias, const float *mean, const float *var, float eps,
                             float *y, CUstream_st *stream) {
  int64_t total = d.batch * d.channels * d.spatial;
  if (total == 0)
    return 0;
  batchNormInferenceKernel<<<blocksFor(total), kThreads, 0, stream>>>(d, x, scale, bias, mean, var,
                                                                      eps, y);
  return launchError();
}

int launchBatchNormTraining(const ChannelDims &d, const float *x, const float *scale,
                            const float *bias, const float *inMean, const float *inVar,
                            float momentum, float eps, float *y, float *runMean, float *runVar,
                            float *mean, float *var, CUstream_st *stream) {
  if (d.channels == 0)
    return 0;
  batchNormTrainingKernel<<<channelBlocks(d.channels), kThreads, 0, stream>>>(
      d, x, scale, bias, inMean, inVar, momentum, eps, y, runMean, runVar, mean, var);
  return launchError();
}

int launchBatchNormGrad(const ChannelDims &d, const float *dy, const float *x, const float *scale,
                        const float *mean, const float *var, float eps, float *dx, float *dScale,
                        float *dB, CUstream_st *stream) {
  if (d.channels == 0)
    return 0;
  batchNormGradKernel<<<channelBlocks(d.channels), kThreads, 0, stream>>>(d, dy, x, scale, mean,
                                                                          var, eps, dx, dScale, dB);
  return launchError();
}

int launchLayerNorm(const float *x, const float *scale, const float *bias, float eps, float *y,
                    float *mean, float *invStd, int64_t outer, int64_t inner, CUstream_st *stream) {
  if (outer == 0)
    return 0;
  layerNormKernel<<<channelBlocks(outer), kThreads, 0, stream>>>(x, scale, bias, eps, y, mean,
                                                                 invStd, outer, inner);
  return launchError();
}

int launchLayerNormGrad(const float *dy, const float *x, const float *scale, float eps, float *dx,
                        float *dScale, float *dB, float *stats, int64_t outer, int64_t inner,
                        CUstream_st *stream) {
  if (inner == 0)
    return 0;
  if (outer > 0) {
    layerNormGradRowsKernel<<<channelBlocks(outer), kThreads, 0, stream>>>(dy, x, scale, eps, dx,
                                                                           stats, outer, inner);
    int e = launchError();
    if (e != 0)
      return e;
  }
  if (!dScale && !dB)
    return 0;
  layerNormGradParamsKernel<<<blocksFor(inner), kThreads, 0, stream>>>(dy, x, stats, dScale, dB,
                                                                       outer, inner);
  return launchError();
}

} // namespace dtc::ops::cuda
