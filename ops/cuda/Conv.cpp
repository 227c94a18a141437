// CUDA kernels of Conv, ai.dtc.FusedConv, ai.dtc.ConvGradData, ai.dtc.ConvGradWeight (with the
// bias gradient as its optional output 1) and ConvTranspose on cuDNN's Nd convolutions (NCHW,
// cross-correlation, groups, dilations). A 1-D convolution is a 2-D one with a trailing unit
// axis. cuDNN pads both ends by the same amount: a window's start depends only on the begin pad,
// so asymmetric pads are accepted when the sizes cuDNN derives with the begin pad on both ends
// equal the real ones (DenseCheck.cpp rejects the others). Math mode CUDNN_FMA_MATH (no TF32), so
// results match the CPU at f32 tolerances. The algorithm is chosen once, at creation, from
// cudnnGet*_v7's ranked list: the first that fits ctx.workspaceLimit(), deterministic ones
// first; its workspace is reserved. ConvTranspose is the data gradient of the convolution that
// maps its output back to its input. FusedConv runs the convolution onto Z (beta = 1), then adds
// the bias and applies a NaN-propagating relu (cuDNN's fused ConvolutionBiasActivation supports
// one algorithm only and requires a bias). An empty batch (N = 0) makes zero-filled outputs.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DenseUtil.h"

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

/// The cuDNN descriptors of one convolution, destroyed with the kernel.
class ConvDescs {
public:
  ~ConvDescs() {
    if (x)
      cudnnDestroyTensorDescriptor(x);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (bias)
      cudnnDestroyTensorDescriptor(bias);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
    if (act)
      cudnnDestroyActivationDescriptor(act);
  }

  /// `biasChannels` > 0: a bias descriptor [1, biasChannels, 1, ...] of the tensors' rank.
  Status init(const ConvPlan &d, const std::string &where, int biasChannels, bool withRelu) {
    DTC_CUDNN_RETURN_IF_ERROR(where, cudnnCreateTensorDescriptor(&x));
    DTC_CUDNN_RETURN_IF_ERROR(where, cudnnCreateTensorDescriptor(&y));
    DTC_CUDNN_RETURN_IF_ERROR(where, cudnnCreateFilterDescriptor(&w));
    DTC_CUDNN_RETURN_IF_ERROR(where, cudnnCreateConvolutionDescriptor(&conv));
    DTC_RETURN_IF_ERROR(setTensor(x, d.x, where));
    DTC_RETURN_IF_ERROR(setTensor(y, d.y, where));
    DTC_CUDNN_RETURN_IF_ERROR(where,
                              cudnnSetFilterNdDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                         static_cast<int>(d.w.size()), d.w.data()));
    DTC_CUDNN_RETURN_IF_ERROR(
        where, cudnnSetConvolutionNdDescriptor(conv, static_cast<int>(d.pads.size()), d.pads.data(),
                                               d.strides.data(), d.dilations.data(),
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DTC_CUDNN_RETURN_IF_ERROR(where, cudnnSetConvolutionGroupCount(conv, d.group));
    DTC_CUDNN_RETURN_IF_ERROR(where, cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
    if (biasChannels > 0) {
      // Broadcast over N and the spatial axes (cudnnAddTensor).
      std::vector<int> b(d.y.size(), 1);
      b[1] = biasChannels;
      DTC_CUDNN_RETURN_IF_ERROR(where, cudnnCreateTensorDescriptor(&bias));
      DTC_RETURN_IF_ERROR(setTensor(bias, b, where));
    }
    if (withRelu) {
      DTC_CUDNN_RETURN_IF_ERROR(where, cudnnCreateActivationDescriptor(&act));
      DTC_CUDNN_RETURN_IF_ERROR(where, cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU,
                                                                    CUDNN_PROPAGATE_NAN, 0.0));
    }
    return Status::ok();
  }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t act = nullptr;

private:
  static Status setTensor(cudnnTensorDescriptor_t t, const std::vector<int> &dims,
                          const std::string &where) {
    std::vector<int> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i-- > 0;)
      strides[i] = strides[i + 1] * std::max(dims[i + 1], 1);
    DTC_CUDNN_RETURN_IF_ERROR(where, cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT,
                                                                static_cast<int>(dims.size()),
                                                                dims.data(), strides.data()));
    return Status::ok();
  }
};

/// The first algorithm of cuDNN's ranked heuristics list that succeeded, whose workspace (asked
/// again with the descriptors' math type) fits `limit`; deterministic ones first, so that runs
/// repeat bit for bit (the strategies' single-device law is checked step by step). `getList` and
/// `getSize` wrap the direction's cuDNN calls.
template <typename Perf, typename Algo, typename GetList, typename GetSize>
Expected<std::pair<Algo, size_t>> chooseAlgo(const std::string &where, size_t limit,
                                             GetList getList, GetSize getSize) {
  std::vector<Perf> perf(32);
  int returned = 0;
  DTC_CUDNN_RETURN_IF_ERROR(where, getList(static_cast<int>(perf.size()), &returned, perf.data()));
  perf.resize(static_cast<size_t>(std::max(returned, 0)));
  std::stable_partition(perf.begin(), perf.end(),
                        [](const Perf &p) { return p.determinism == CUDNN_DETERMINISTIC; });
  for (const Perf &p : perf) {
    // Tensor-op (TF32) entries would not match the CPU at f32 tolerances.
    if (p.status != CUDNN_STATUS_SUCCESS ||
        (p.mathType != CUDNN_DEFAULT_MATH && p.mathType != CUDNN_FMA_MATH))
      continue;
    size_t bytes = 0;
    if (getSize(p.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > limit)
      continue;
    return std::make_pair(static_cast<Algo>(p.algo), bytes);
  }
  return Status::error(where, "cuDNN has no convolution algorithm for these shapes within the " +
                                  std::to_string(limit >> 20) +
                                  " MiB workspace limit (dtc-run --cuda-workspace-mb)");
}

/// Operand `id` of a ConvPlan (input id, or output -1 - id).
const void *input(const KernelArgs &args, int id) { return args.inputs[static_cast<size_t>(id)]; }
void *output(const KernelArgs &args, int id) { return args.outputs[static_cast<size_t>(-1 - id)]; }

class ConvKernel : public Kernel {
public:
  ConvKernel(const KernelSpec &spec, CudaContext &ctx, ConvPlan plan)
      : where_(spec.where()), ctx_(ctx), plan_(std::move(plan)),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {}

  Status init() {
    const ConvPlan &d = plan_;
    DTC_RETURN_IF_ERROR(descs_.init(d, where_, d.biasChannels, d.relu));
    cudnnHandle_t h = ctx_.cudnn();
    size_t limit = ctx_.workspaceLimit();
    switch (d.kind) {
    case ConvKind::kForward: {
      DTC_ASSIGN_OR_RETURN(auto r,
                           (chooseAlgo<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
                               where_, limit,
                               [&](int n, int *got, cudnnConvolutionFwdAlgoPerf_t *p) {
                                 return cudnnGetConvolutionForwardAlgorithm_v7(
                                     h, descs_.x, descs_.w, descs_.conv, descs_.y, n, got, p);
                               },
                               [&](cudnnConvolutionFwdAlgo_t a, size_t *bytes) {
                                 return cudnnGetConvolutionForwardWorkspaceSize(
                                     h, descs_.x, descs_.w, descs_.conv, descs_.y, a, bytes);
                               })));
      fwd_ = r.first;
      wsBytes_ = r.second;
      break;
    }
    case ConvKind::kBackwardData: {
      DTC_ASSIGN_OR_RETURN(
          auto r, (chooseAlgo<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
                      where_, limit,
                      [&](int n, int *got, cudnnConvolutionBwdDataAlgoPerf_t *p) {
                        return cudnnGetConvolutionBackwardDataAlgorithm_v7(
                            h, descs_.w, descs_.y, descs_.conv, descs_.x, n, got, p);
                      },
                      [&](cudnnConvolutionBwdDataAlgo_t a, size_t *bytes) {
                        return cudnnGetConvolutionBackwardDataWorkspaceSize(
                            h, descs_.w, descs_.y, descs_.conv, descs_.x, a, bytes);
                      })));
      bwdData_ = r.first;
      wsBytes_ = r.second;
      break;
    }
    case ConvKind::kBackwardFilter: {
      DTC_ASSIGN_OR_RETURN(
          auto r, (chooseAlgo<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
                      where_, limit,
                      [&](int n, int *got, cudnnConvolutionBwdFilterAlgoPerf_t *p) {
                        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                            h, descs_.x, descs_.y, descs_.conv, descs_.w, n, got, p);
                      },
                      [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *bytes) {
                        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                            h, descs_.x, descs_.y, descs_.conv, descs_.w, a, bytes);
                      })));
      bwdFilter_ = r.first;
      wsBytes_ = r.second;
      break;
    }
    }
    ctx_.reserveWorkspace(wsBytes_);
    return Status::ok();
  }

  Status run(const KernelArgs &args) override {
    void *ws = nullptr;
    if (wsBytes_ > 0) {
      DTC_ASSIGN_OR_RETURN(ws, ctx_.workspace(wsBytes_, where_));
    }
    cudnnHandle_t h = ctx_.cudnn();
    const float one = 1.f, zero = 0.f;
    const ConvPlan &p = plan_;
    switch (p.kind) {
    case ConvKind::kForward: {
      void *y = output(args, p.yId);
      float beta = 0.f;
      if (p.z >= 0) { // FusedConv's Z: the convolution adds to it
        const void *z = args.inputs[static_cast<size_t>(p.z)];
        if (z != y)
          DTC_CUDA_RETURN_IF_ERROR(
              where_, cudaMemcpyAsync(y, z, outBytes_, cudaMemcpyDeviceToDevice, ctx_.stream()));
        beta = 1.f;
      }
      DTC_CUDNN_RETURN_IF_ERROR(where_,
                                cudnnConvolutionForward(h, &one, descs_.x, input(args, p.xId),
                                                        descs_.w, input(args, p.wId), descs_.conv,
                                                        fwd_, ws, wsBytes_, &beta, descs_.y, y));
      if (descs_.bias && args.inputs[static_cast<size_t>(p.bias)])
        DTC_CUDNN_RETURN_IF_ERROR(where_, cudnnAddTensor(h, &one, descs_.bias,
                                                         args.inputs[static_cast<size_t>(p.bias)],
                                                         &one, descs_.y, y));
      if (descs_.act)
        DTC_CUDNN_RETURN_IF_ERROR(
            where_, cudnnActivationForward(h, descs_.act, &one, descs_.y, y, &zero, descs_.y, y));
      return Status::ok();
    }
    case ConvKind::kBackwardData: { // ConvGradData, ConvTranspose: x is the result
      void *x = output(args, p.xId);
      DTC_CUDNN_RETURN_IF_ERROR(
          where_, cudnnConvolutionBackwardData(h, &one, descs_.w, input(args, p.wId), descs_.y,
                                               input(args, p.yId), descs_.conv, bwdData_, ws,
                                               wsBytes_, &zero, descs_.x, x));
      if (descs_.bias && args.inputs[static_cast<size_t>(p.bias)])
        DTC_CUDNN_RETURN_IF_ERROR(where_, cudnnAddTensor(h, &one, descs_.bias,
                                                         args.inputs[static_cast<size_t>(p.bias)],
                                                         &one, descs_.x, x));
      return Status::ok();
    }
    case ConvKind::kBackwardFilter: { // ConvGradWeight: w (and the bias gradient) the results
      DTC_CUDNN_RETURN_IF_ERROR(
          where_, cudnnConvolutionBackwardFilter(h, &one, descs_.x, input(args, p.xId), descs_.y,
                                                 input(args, p.yId), descs_.conv, bwdFilter_, ws,
                                                 wsBytes_, &zero, descs_.w, output(args, p.wId)));
      if (descs_.bias && args.numOutputs > static_cast<size_t>(p.biasGrad) &&
          args.outputs[static_cast<size_t>(p.biasGrad)])
        DTC_CUDNN_RETURN_IF_ERROR(
            where_,
            cudnnConvolutionBackwardBias(h, &one, descs_.y, input(args, p.yId), &zero, descs_.bias,
                                         args.outputs[static_cast<size_t>(p.biasGrad)]));
      return Status::ok();
    }
    }
    return Status::ok();
  }

  std::string where_;
  CudaContext &ctx_;
  ConvPlan plan_;
  size_t outBytes_;
  ConvDescs descs_;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwdData_{};
  cudnnConvolutionBwdFilterAlgo_t bwdFilter_{};
  size_t wsBytes_ = 0;
};

/// N = 0 (cuDNN rejects empty tensors): every output is zero-filled (the weight and bias
/// gradients are sums over nothing; the other outputs are empty).
class EmptyBatchKernel : public Kernel {
public:
  EmptyBatchKernel(const KernelSpec &spec, CudaContext &ctx) : where_(spec.where()), ctx_(ctx) {
    for (const TensorDesc &t : spec.outputs)
      bytes_.push_back(t.present() ? static_cast<size_t>(t.byteSize()) : 0);
  }
  Status run(const KernelArgs &args) override {
    for (size_t i = 0; i < args.numOutputs && i < bytes_.size(); ++i)
      if (args.outputs[i] && bytes_[i] > 0)
        DTC_CUDA_RETURN_IF_ERROR(where_,
                                 cudaMemsetAsync(args.outputs[i], 0, bytes_[i], ctx_.stream()));
    return Status::ok();
  }

private:
  std::string where_;
  CudaContext &ctx_;
  std::vector<size_t> bytes_;
};

Expected<KernelPtr> makeConv(const KernelSpec &spec, CudaContext &ctx) {
  ConvPlan plan = convPlan(spec);
  if (plan.x[0] == 0)
    return KernelPtr(std::make_unique<EmptyBatchKernel>(spec, ctx));
  auto k = std::make_unique<ConvKernel>(spec, ctx, std::move(plan));
  DTC_RETURN_IF_ERROR(k->init());
  return KernelPtr(std::move(k));
}

} // namespace

Expected<KernelPtr> createConv(const KernelSpec &spec, CudaContext &ctx) {
  return makeConv(spec, ctx);
}

Expected<KernelPtr> createFusedConv(const KernelSpec &spec, CudaContext &ctx) {
  return makeConv(spec, ctx);
}

Expected<KernelPtr> createConvGradData(const KernelSpec &spec, CudaContext &ctx) {
  return makeConv(spec, ctx);
}

Expected<KernelPtr> createConvGradWeight(const KernelSpec &spec, CudaContext &ctx) {
  return makeConv(spec, ctx);
}

Expected<KernelPtr> createConvTranspose(const KernelSpec &spec, CudaContext &ctx) {
  return makeConv(spec, ctx);
}

} // namespace dtc::ops::cuda
