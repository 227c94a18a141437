// CUDA kernels of the ai.dtc optimizer ops (formulas: ops/training/Optimizer.cpp and the CPU's
// ops/cpu/Optimizer.cpp): SGD (momentum, nesterov, weight decay), Adam and AdamW as one fused
// elementwise pass per parameter that reads lr, the step and the optional gradient scale from
// the device (each element is read before it is written, so outputs may share their inputs'
// bytes); SumSquares (multi-tensor: the gradients in chunks of pointers passed by value, one
// partial sum per block in double, then one block adds the partials in a fixed order: the same
// bits on every run); ClipGradNormScale; ZeroGradient.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/TrainingUtil.cuh"

namespace dtc::ops::cuda {

namespace {

struct OptimizerAttrs {
  bool sgd, adamw;
  float momentum, weightDecay, beta1, beta2, eps;
  bool nesterov;
};

__global__ void sgdKernel(OptimizerAttrs a, const float *p, const float *g, const float *lr,
                          const float *buf, const float *scalePtr, float *po, float *bo,
                          int64_t n) {
  const float rate = *lr, scale = scalePtr ? *scalePtr : 1.f;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    float pi = p[i], b = buf ? buf[i] : 0.f;
    sgdStep(rate, a.momentum, a.nesterov, a.weightDecay, scale, g[i], pi, b);
    po[i] = pi;
    if (bo)
      bo[i] = b;
  }
}

__global__ void adamKernel(OptimizerAttrs a, const float *p, const float *g, const float *lr,
                           const int64_t *step, const float *m, const float *v,
                           const float *scalePtr, float *po, float *mo, float *vo, int64_t n) {
  const AdamScalars s = adamScalars(*lr, *step, a.beta1, a.beta2, a.weightDecay);
  const float scale = scalePtr ? *scalePtr : 1.f;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamStep(a.adamw, s, a.beta1, a.beta2, a.eps, a.weightDecay, scale, g[i], pi, mi, vi);
    po[i] = pi;
    mo[i] = mi;
    vo[i] = vi;
  }
}

class OptimizerKernel : public Kernel {
public:
  OptimizerKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), n_(spec.inputs[0].numElements()) {
    a_.sgd = spec.op == "SGD";
    a_.adamw = spec.op == "AdamW";
    a_.momentum = spec.attrFloat("momentum", 0.f);
    a_.nesterov = spec.attrInt("nesterov", 0) != 0;
    a_.weightDecay = spec.attrFloat("weight_decay", 0.f);
    a_.beta1 = spec.attrFloat("beta1", 0.9f);
    a_.beta2 = spec.attrFloat("beta2", 0.999f);
    a_.eps = spec.attrFloat("epsilon", 1e-8f);
  }

  Status run(const KernelArgs &args) override {
    auto in = [&](size_t i) {
      return static_cast<const float *>(i < args.numInputs ? args.inputs[i] : nullptr);
    };
    auto out = [&](size_t i) {
      return static_cast<float *>(i < args.numOutputs ? args.outputs[i] : nullptr);
    };
    if (a_.sgd) {
      const bool momentum = a_.momentum != 0.f;
      sgdKernel<<<gridFor(n_), kBlock, 0, ctx_.stream()>>>(a_, in(0), in(1), in(2),
                                                           momentum ? in(3) : nullptr, in(4),
                                                           out(0), momentum ? out(1) : nullptr, n_);
    } else {
      adamKernel<<<gridFor(n_), kBlock, 0, ctx_.stream()>>>(
          a_, in(0), in(1), in(2), static_cast<const int64_t *>(args.inputs[3]), in(4), in(5),
          in(6), out(0), out(1), out(2), n_);
    }
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  int64_t n_;
  OptimizerAttrs a_{};
};

// ---------------------------------------------------------------------------------------------
// SumSquares.

constexpr int kChunk = 32; ///< tensors per launch (kernel parameters stay under 1 KiB)

struct SumSquaresChunk {
  const float *ptr[kChunk];
  int64_t n[kChunk];
  int64_t firstBlock[kChunk + 1]; ///< tensor t owns blocks [firstBlock[t], firstBlock[t + 1])
  int count;
  int64_t partialOffset; ///< this chunk's first partial
};

__global__ void sumSquaresPartialKernel(SumSquaresChunk c, double *partials) {
  __shared__ double scratch[kBlock];
  const int64_t b = blockIdx.x;
  int t = 0;
  while (t + 1 < c.count && c.firstBlock[t + 1] <= b)
    ++t;
  const int64_t blocks = c.firstBlock[t + 1] - c.firstBlock[t];
  const int64_t local = b - c.firstBlock[t];
  const float *x = c.ptr[t];
  double acc = 0.0;
  for (int64_t i = local * kBlock + threadIdx.x; i < c.n[t]; i += blocks * kBlock) {
    const double v = x[i];
    acc += v * v;
  }
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (int k = kBlock / 2; k > 0; k /= 2) {
    if (static_cast<int>(threadIdx.x) < k)
      scratch[threadIdx.x] += scratch[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partials[c.partialOffset + b] = scratch[0];
}

__global__ void sumPartialsKernel(const double *partials, int64_t count, float *out) {
  __shared__ double scratch[kBlock];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    acc += partials[i];
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (int k = kBlock / 2; k > 0; k /= 2) {
    if (static_cast<int>(threadIdx.x) < k)
      scratch[threadIdx.x] += scratch[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *out = static_cast<float>(scratch[0]);
}

class SumSquaresKernel : public Kernel {
public:
  SumSquaresKernel(const KernelSpec &spec, CudaContext &ctx) : where_(spec.where()), ctx_(ctx) {
    for (const TensorDesc &t : spec.inputs) {
      const int64_t n = t.numElements();
      // Up to 8 elements per thread at first, at most 1024 blocks per tensor.
      int64_t blocks = (n + kBlock * 8 - 1) / (kBlock * 8);
      blocks = blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks);
      sizes_.push_back(n);
      blocks_.push_back(blocks);
      totalBlocks_ += blocks;
    }
    ctx.reserveWorkspace(bytes());
  }

  Status run(const KernelArgs &args) override {
    DTC_ASSIGN_OR_RETURN(void *ws, ctx_.workspace(bytes(), where_));
    double *partials = static_cast<double *>(ws);
    int64_t offset = 0;
    for (size_t first = 0; first < sizes_.size(); first += kChunk) {
      SumSquaresChunk c{};
      c.partialOffset = offset;
      int64_t blocks = 0;
      for (size_t t = first; t < sizes_.size() && c.count < kChunk; ++t) {
        c.ptr[c.count] = static_cast<const float *>(args.inputs[t]);
        c.n[c.count] = sizes_[t];
        c.firstBlock[c.count] = blocks;
        blocks += blocks_[t];
        ++c.count;
      }
      c.firstBlock[c.count] = blocks;
      sumSquaresPartialKernel<<<static_cast<unsigned>(blocks), kBlock, 0, ctx_.stream()>>>(
          c, partials);
      offset += blocks;
    }
    sumPartialsKernel<<<1, kBlock, 0, ctx_.stream()>>>(partials, offset,
                                                       static_cast<float *>(args.outputs[0]));
    return lastLaunchError(where_);
  }

private:
  size_t bytes() const { return static_cast<size_t>(totalBlocks_) * sizeof(double); }

  std::string where_;
  CudaContext &ctx_;
  std::vector<int64_t> sizes_, blocks_;
  int64_t totalBlocks_ = 0;
};

// ---------------------------------------------------------------------------------------------
// ClipGradNormScale: the scalar sums of squares in chunks of pointers, accumulated in double.

struct ScalarChunk {
  const float *ptr[kChunk];
  int count;
};

__global__ void clipNormKernel(ScalarChunk c, double *sum, bool first, bool last, float maxNorm,
                               float inputScale, float *out) {
  double s = first ? 0.0 : *sum;
  for (int k = 0; k < c.count; ++k)
    s += *c.ptr[k];
  *sum = s;
  if (last)
    *out = clipGradNormScale(s, maxNorm, inputScale);
}

class ClipGradNormScaleKernel : public Kernel {
public:
  ClipGradNormScaleKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), maxNorm_(spec.attrFloat("max_norm", 1.f)),
        inputScale_(spec.attrFloat("input_scale", 1.f)), numInputs_(spec.inputs.size()) {}

  Status init() {
    DTC_ASSIGN_OR_RETURN(sum_, ctx_.allocate(sizeof(double), where_ + " (sum)"));
    return Status::ok();
  }

  Status run(const KernelArgs &args) override {
    for (size_t first = 0; first < numInputs_; first += kChunk) {
      ScalarChunk c{};
      for (size_t k = first; k < numInputs_ && c.count < kChunk; ++k)
        c.ptr[c.count++] = static_cast<const float *>(args.inputs[k]);
      clipNormKernel<<<1, 1, 0, ctx_.stream()>>>(
          c, static_cast<double *>(sum_.get()), first == 0, first + kChunk >= numInputs_, maxNorm_,
          inputScale_, static_cast<float *>(args.outputs[0]));
    }
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  float maxNorm_, inputScale_;
  size_t numInputs_;
  DeviceBuffer sum_;
};

class ZeroGradientKernel : public Kernel {
public:
  ZeroGradientKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), bytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {}
  Status run(const KernelArgs &args) override {
    DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemsetAsync(args.outputs[0], 0, bytes_, ctx_.stream()));
    return Status::ok();
  }

private:
  std::string where_;
  CudaContext &ctx_;
  size_t bytes_;
};

} // namespace

Expected<KernelPtr> createOptimizer(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<OptimizerKernel>(spec, ctx));
}

Expected<KernelPtr> createSumSquares(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<SumSquaresKernel>(spec, ctx));
}

Expected<KernelPtr> createClipGradNormScale(const KernelSpec &spec, CudaContext &ctx) {
  auto k = std::make_unique<ClipGradNormScaleKernel>(spec, ctx);
  DTC_RETURN_IF_ERROR(k->init());
  return KernelPtr(std::move(k));
}

Expected<KernelPtr> createZeroGradient(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ZeroGradientKernel>(spec, ctx));
}

} // namespace dtc::ops::cuda
