// CUDA kernels of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss and their gradients
// ai.dtc.SoftmaxCrossEntropyLossGrad and ai.dtc.NegativeLogLikelihoodLossGrad, with the CPU
// kernels' semantics (ops/cpu/Loss.cpp, TensorGradLoss.cpp; the ONNX reference and PyTorch's
// cross_entropy / nll_loss): scores (N, C, d1..dk) seen as (N, C, D), one sample per (n, j),
// labels i64 or i32, optional class weights, ignore_index, reduction none/sum/mean ("mean"
// divides by the sum of the applied weights; 0/0 is NaN). The per-sample work runs one block
// per sample when D = 1 (classes contiguous) and one thread per sample otherwise (coalesced over
// positions); sums over samples are one block in double, in a fixed order. A label outside
// [0, C) that is not ignore_index is an error reported at the next synchronization. Also
// ai.dtc.CheckLabels (the vocabulary-parallel loss's label check), with the same error.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/TrainingUtil.cuh"

namespace dtc::ops::cuda {

namespace {

using ir::DType;

__global__ void lossBlockKernel(LossShape s, bool softmax, const float *x, const void *labels,
                                const float *w, float *loss, float *logProb, double *scratch,
                                int *errorSlot) {
  __shared__ float fscratch[kBlock];
  __shared__ double dscratch[kBlock];
  for (int64_t i = blockIdx.x; i < s.samples(); i += gridDim.x)
    lossSample(s, softmax, x, labels, w, loss, logProb, scratch, errorSlot, i,
               static_cast<int>(threadIdx.x), kBlock, fscratch, dscratch);
}

__global__ void lossThreadKernel(LossShape s, bool softmax, const float *x, const void *labels,
                                 const float *w, float *loss, float *logProb, double *scratch,
                                 int *errorSlot) {
  for (int64_t i = gridStart(); i < s.samples(); i += gridStride())
    lossSample(s, softmax, x, labels, w, loss, logProb, scratch, errorSlot, i, 0, 1, nullptr,
               nullptr);
}

/// loss[0] = sum of the per-sample losses (sum) or that over the sum of the weights (mean).
__global__ void lossTotalKernel(LossShape s, const double *scratch, float *loss) {
  __shared__ double sums[kBlock];
  double l = 0.0, wt = 0.0;
  for (int64_t i = threadIdx.x; i < s.samples(); i += blockDim.x) {
    l += scratch[i];
    wt += scratch[s.samples() + i];
  }
  l = blockSum(l, sums);
  wt = blockSum(wt, sums);
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(s.reduction == 2 ? l / wt : l);
}

/// Gradients, reduction sum or mean: *g = dloss (sum) or dloss / (sum of applied weights).
__global__ void gradScaleKernel(LossShape s, const float *dloss, const void *labels, const float *w,
                                double *g, int *errorSlot) {
  __shared__ double sums[kBlock];
  double wt = 0.0;
  for (int64_t i = threadIdx.x; i < s.samples(); i += blockDim.x) {
    const int64_t y = sampleLabel(s, labels, i, errorSlot);
    if (y >= 0)
      wt += w ? w[y] : 1.f;
  }
  wt = blockSum(wt, sums);
  if (threadIdx.x == 0)
    *g = s.reduction == 2 ? static_cast<double>(dloss[0]) / wt : static_cast<double>(dloss[0]);
}

__global__ void sceGradBlockKernel(LossShape s, const float *dloss, const float *x,
                                   const void *labels, const float *w, const float *dlp,
                                   const double *g, float *dx, int *errorSlot) {
  __shared__ float fscratch[kBlock];
  __shared__ double dscratch[kBlock];
  for (int64_t i = blockIdx.x; i < s.samples(); i += gridDim.x)
    sceGradSample(s, dloss, x, labels, w, dlp, g, dx, errorSlot, i, static_cast<int>(threadIdx.x),
                  kBlock, fscratch, dscratch);
}

__global__ void sceGradThreadKernel(LossShape s, const float *dloss, const float *x,
                                    const void *labels, const float *w, const float *dlp,
                                    const double *g, float *dx, int *errorSlot) {
  for (int64_t i = gridStart(); i < s.samples(); i += gridStride())
    sceGradSample(s, dloss, x, labels, w, dlp, g, dx, errorSlot, i, 0, 1, nullptr, nullptr);
}

/// dinput = -scale at the target class (dx zeroed before).
__global__ void nllGradKernel(LossShape s, const float *dloss, const void *labels, const float *w,
                              const double *g, float *dx, int *errorSlot) {
  for (int64_t i = gridStart(); i < s.samples(); i += gridStride()) {
    int64_t y;
    const float scale = sampleScale(s, dloss, labels, w, g, i, errorSlot, y);
    const int64_t n = i / s.d, j = i - n * s.d;
    if (y >= 0)
      dx[(n * s.c + y) * s.d + j] = -scale;
  }
}

/// CheckLabels: every label against [0, C) except ignore_index (s.n = the labels, s.d = 1).
__global__ void checkLabelsKernel(LossShape s, const void *labels, int *errorSlot) {
  for (int64_t i = gridStart(); i < s.samples(); i += gridStride())
    sampleLabel(s, labels, i, errorSlot);
}

LossShape lossShape(const KernelSpec &spec, const std::vector<int64_t> &scores, size_t labelsInput,
                    CudaContext &ctx) {
  LossShape s{};
  s.n = scores[0];
  s.c = scores[1];
  s.d = 1;
  for (size_t i = 2; i < scores.size(); ++i)
    s.d *= scores[i];
  s.labels32 = spec.inputs[labelsInput].dtype == DType::kInt32;
  s.hasIgnore = spec.attrs.count("ignore_index") > 0;
  s.ignore = spec.attrInt("ignore_index", 0);
  const std::string r = spec.attrString("reduction", "mean");
  s.reduction = r == "none" ? 0 : r == "sum" ? 1 : 2;
  s.site = ctx.addErrorSite(spec.where() + ": a label is out of range [0, " + std::to_string(s.c) +
                            ")" + (s.hasIgnore ? " and is not ignore_index" : ""));
  return s;
}

const void *optional(const KernelArgs &args, size_t i) {
  return i < args.numInputs ? args.inputs[i] : nullptr;
}

/// Blocks for one-block-per-sample kernels.
unsigned sampleBlocks(int64_t samples) {
  return static_cast<unsigned>(samples < 65536 ? (samples > 0 ? samples : 1) : 65536);
}

class LossKernel : public Kernel {
public:
  LossKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), softmax_(spec.op == "SoftmaxCrossEntropyLoss"),
        s_(lossShape(spec, spec.inputs[0].shape, 1, ctx)) {
    if (s_.reduction != 0)
      ctx.reserveWorkspace(scratchBytes());
  }

  Status run(const KernelArgs &args) override {
    double *scratch = nullptr;
    if (s_.reduction != 0) {
      DTC_ASSIGN_OR_RETURN(void *ws, ctx_.workspace(scratchBytes(), where_));
      scratch = static_cast<double *>(ws);
    }
    const float *x = static_cast<const float *>(args.inputs[0]);
    const float *w = static_cast<const float *>(optional(args, 2));
    float *loss = static_cast<float *>(args.outputs[0]);
    float *logProb = args.numOutputs > 1 ? static_cast<float *>(args.outputs[1]) : nullptr;
    if (s_.d == 1)
      lossBlockKernel<<<sampleBlocks(s_.samples()), kBlock, 0, ctx_.stream()>>>(
          s_, softmax_, x, args.inputs[1], w, loss, logProb, scratch, ctx_.errorSlot());
    else
      lossThreadKernel<<<gridFor(s_.samples()), kBlock, 0, ctx_.stream()>>>(
          s_, softmax_, x, args.inputs[1], w, loss, logProb, scratch, ctx_.errorSlot());
    if (s_.reduction != 0)
      lossTotalKernel<<<1, kBlock, 0, ctx_.stream()>>>(s_, scratch, loss);
    return lastLaunchError(where_);
  }

private:
  size_t scratchBytes() const { return static_cast<size_t>(2 * s_.samples()) * sizeof(double); }

  std::string where_;
  CudaContext &ctx_;
  bool softmax_;
  LossShape s_;
};

/// SoftmaxCrossEntropyLossGrad (inputs dloss, scores, labels, weights?, dlog_prob?) and
/// NegativeLogLikelihoodLossGrad (dloss, target, weight?).
class LossGradKernel : public Kernel {
public:
  LossGradKernel(const KernelSpec &spec, CudaContext &ctx, bool softmax)
      : where_(spec.where()), ctx_(ctx), softmax_(softmax),
        s_(lossShape(spec, spec.outputs[0].shape, softmax ? 2 : 1, ctx)),
        bytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {}

  Status init() {
    DTC_ASSIGN_OR_RETURN(g_, ctx_.allocate(sizeof(double), where_ + " (gradient scale)"));
    return Status::ok();
  }

  Status run(const KernelArgs &args) override {
    const size_t labelsInput = softmax_ ? 2 : 1;
    const void *labels = args.inputs[labelsInput];
    const float *w = static_cast<const float *>(optional(args, labelsInput + 1));
    const float *dloss = static_cast<const float *>(args.inputs[0]);
    float *dx = static_cast<float *>(args.outputs[0]);
    double *g = static_cast<double *>(g_.get());
    cudaStream_t st = ctx_.stream();
    if (s_.reduction != 0)
      gradScaleKernel<<<1, kBlock, 0, st>>>(s_, dloss, labels, w, g, ctx_.errorSlot());
    if (softmax_) {
      const float *x = static_cast<const float *>(args.inputs[1]);
      const float *dlp = static_cast<const float *>(optional(args, 4));
      if (s_.d == 1)
        sceGradBlockKernel<<<sampleBlocks(s_.samples()), kBlock, 0, st>>>(
            s_, dloss, x, labels, w, dlp, g, dx, ctx_.errorSlot());
      else
        sceGradThreadKernel<<<gridFor(s_.samples()), kBlock, 0, st>>>(s_, dloss, x, labels, w, dlp,
                                                                      g, dx, ctx_.errorSlot());
    } else {
      DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemsetAsync(dx, 0, bytes_, st));
      nllGradKernel<<<gridFor(s_.samples()), kBlock, 0, st>>>(s_, dloss, labels, w, g, dx,
                                                              ctx_.errorSlot());
    }
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  bool softmax_;
  LossShape s_;
  size_t bytes_;
  DeviceBuffer g_;
};

/// CheckLabels(labels) -> labels, a view: the labels are checked and copied only when the
/// planner did not alias the output to the input.
class CheckLabelsKernel : public Kernel {
public:
  CheckLabelsKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), bytes_(static_cast<size_t>(spec.inputs[0].byteSize())) {
    s_ = LossShape{};
    s_.n = spec.inputs[0].numElements();
    s_.c = spec.attrInt("classes", 0);
    s_.d = 1;
    s_.labels32 = spec.inputs[0].dtype == DType::kInt32;
    s_.hasIgnore = spec.attrs.count("ignore_index") > 0;
    s_.ignore = spec.attrInt("ignore_index", 0);
    s_.site =
        ctx.addErrorSite(spec.where() + ": a label is out of range [0, " + std::to_string(s_.c) +
                         ")" + (s_.hasIgnore ? " and is not ignore_index" : ""));
  }

  Status run(const KernelArgs &args) override {
    if (s_.n > 0)
      checkLabelsKernel<<<gridFor(s_.n), kBlock, 0, ctx_.stream()>>>(s_, args.inputs[0],
                                                                     ctx_.errorSlot());
    if (args.outputs[0] != args.inputs[0])
      DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemcpyAsync(args.outputs[0], args.inputs[0], bytes_,
                                                       cudaMemcpyDeviceToDevice, ctx_.stream()));
    return lastLaunchError(where_);
  }

private:
  std::string where_;
  CudaContext &ctx_;
  size_t bytes_;
  LossShape s_{};
};

} // namespace

Expected<KernelPtr> createCheckLabels(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<CheckLabelsKernel>(spec, ctx));
}

Expected<KernelPtr> createLoss(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<LossKernel>(spec, ctx));
}

Expected<KernelPtr> createSceLossGrad(const KernelSpec &spec, CudaContext &ctx) {
  auto k = std::make_unique<LossGradKernel>(spec, ctx, true);
  DTC_RETURN_IF_ERROR(k->init());
  return KernelPtr(std::move(k));
}

Expected<KernelPtr> createNllLossGrad(const KernelSpec &spec, CudaContext &ctx) {
  auto k = std::make_unique<LossGradKernel>(spec, ctx, false);
  DTC_RETURN_IF_ERROR(k->init());
  return KernelPtr(std::move(k));
}

} // namespace dtc::ops::cuda
