// CUDA kernels of ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSumExp and ReduceSumSquare (f32 accumulated in double, i64 wrapping, as the CPU
// kernels), and ArgMax / ArgMin (one thread per line along the axis). The axes arrive at run time
// in device memory: a one-thread kernel builds the reduction plan from them (TrainingUtil.cuh
// buildReducePlan, the CPU kernel's checks: an axis out of range or named twice, or axes that do
// not give the plan's output shape, is an error reported at the next synchronization) and the
// reduction reads the plan, so nothing waits for the host. Without axes the plan is built once on
// the host. One block per output when the innermost axis is reduced; otherwise (reduced elements
// strided, reads coalesced across outputs) tiles of 32 outputs by 16 threads splitting each
// output's elements, or one thread per output when each has few elements.
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/TrainingUtil.cuh"

namespace dtc::ops::cuda {

namespace {

using ir::DType;

__global__ void reducePlanKernel(ReduceShape shape, const int64_t *axes, int64_t numAxes,
                                 ReducePlan *plan, int *errorSlot, int site) {
  ReducePlan p{};
  buildReducePlan(shape, axes, numAxes, p);
  *plan = p;
  if (!p.ok)
    reportError(errorSlot, site);
}

/// Copies the plan (from device memory when `fromDevice`, else the by-value one) into shared
/// memory for the block.
__device__ inline void loadPlan(ReducePlan &dst, const ReducePlan *fromDevice,
                                const ReducePlan &byValue) {
  if (threadIdx.x == 0)
    dst = fromDevice ? *fromDevice : byValue;
  __syncthreads();
}

template <typename T, typename A>
__device__ inline T finishValue(ReduceOp op, A acc, const T *x, int64_t base, const ReducePlan &p) {
  if constexpr (!std::is_integral_v<A>) {
    if (op == ReduceOp::kLogSumExp && isfinite(acc)) {
      double s = 0.0;
      for (int64_t r = 0; r < p.mid; ++r)
        s += exp(static_cast<double>(x[base + p.reducedOffset(r)]) - acc);
      acc += log(s);
    }
  }
  return static_cast<T>(reduceFinish(op, acc, p.mid));
}

/// One thread per output element.
template <typename T, typename A>
__global__ void reduceThreadKernel(ReduceOp op, const T *x, T *y, int64_t outCount,
                                   const ReducePlan *planPtr, ReducePlan planValue) {
  __shared__ ReducePlan p;
  loadPlan(p, planPtr, planValue);
  if (!p.ok)
    return;
  for (int64_t o = gridStart(); o < outCount; o += gridStride()) {
    const int64_t base = p.keptOffset(o);
    A acc = reduceInit<A>(op);
    for (int64_t r = 0; r < p.mid; ++r)
      acc = reduceStep<A>(op, acc, static_cast<A>(x[base + p.reducedOffset(r)]));
    y[o] = finishValue<T, A>(op, acc, x, base, p);
  }
}

constexpr int kTileX = 32, kTileY = 16;

/// Strided reductions with many elements per output (bias gradients: (N*T, C) -> C): a block
/// of kTileX consecutive outputs (coalesced reads across x) by kTileY threads that split each
/// output's reduced elements, combined in shared memory.
template <typename T, typename A>
__global__ void reduceTileKernel(ReduceOp op, const T *x, T *y, int64_t outCount,
                                 const ReducePlan *planPtr, ReducePlan planValue) {
  __shared__ ReducePlan p;
  __shared__ A scratch[kTileY][kTileX];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  if (tx == 0 && ty == 0)
    p = planPtr ? *planPtr : planValue;
  __syncthreads();
  if (!p.ok)
    return;
  for (int64_t tile = blockIdx.x; tile * kTileX < outCount; tile += gridDim.x) {
    const int64_t o = tile * kTileX + tx;
    const bool active = o < outCount;
    const int64_t base = active ? p.keptOffset(o) : 0;
    A acc = reduceInit<A>(op);
    if (active)
      for (int64_t r = ty; r < p.mid; r += kTileY)
        acc = reduceStep<A>(op, acc, static_cast<A>(x[base + p.reducedOffset(r)]));
    scratch[ty][tx] = acc;
    __syncthreads();
    if (ty == 0) {
      for (int k = 1; k < kTileY; ++k)
        acc = reduceCombine<A>(op, acc, scratch[k][tx]);
      scratch[0][tx] = acc;
    }
    __syncthreads();
    acc = scratch[0][tx];
    __syncthreads(); // scratch is reused below and by the next tile
    if constexpr (!std::is_integral_v<A>) {
      if (op == ReduceOp::kLogSumExp) {
        const bool finite = isfinite(acc);
        double sum = 0.0;
        if (active && finite)
          for (int64_t r = ty; r < p.mid; r += kTileY)
            sum += exp(static_cast<double>(x[base + p.reducedOffset(r)]) - acc);
        scratch[ty][tx] = sum;
        __syncthreads();
        if (ty == 0) {
          for (int k = 1; k < kTileY; ++k)
            sum += scratch[k][tx];
          scratch[0][tx] = sum;
        }
        __syncthreads();
        sum = scratch[0][tx];
        __syncthreads();
        if (finite)
          acc += log(sum);
      }
    }
    if (ty == 0 && active)
      y[o] = static_cast<T>(reduceFinish(op, acc, p.mid));
  }
}

/// Block-wide combination of one value per thread (blockDim.x == kBlock); every thread gets
/// the result.
template <typename A> __device__ inline A blockCombine(ReduceOp op, A v, A *scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s)
      scratch[threadIdx.x] = reduceCombine<A>(op, scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  const A r = scratch[0];
  __syncthreads();
  return r;
}

/// One block per output element (the reduced elements are contiguous or nearly so).
template <typename T, typename A>
__global__ void reduceBlockKernel(ReduceOp op, const T *x, T *y, int64_t outCount,
                                  const ReducePlan *planPtr, ReducePlan planValue) {
  __shared__ ReducePlan p;
  __shared__ A scratch[kBlock];
  loadPlan(p, planPtr, planValue);
  if (!p.ok)
    return;
  for (int64_t o = blockIdx.x; o < outCount; o += gridDim.x) {
    const int64_t base = p.keptOffset(o);
    A acc = reduceInit<A>(op);
    for (int64_t r = threadIdx.x; r < p.mid; r += blockDim.x)
      acc = reduceStep<A>(op, acc, static_cast<A>(x[base + p.reducedOffset(r)]));
    // Partial sums of squares/absolute values combine by addition (reduceCombine's default).
    acc = blockCombine<A>(op, acc, scratch);
    if constexpr (!std::is_integral_v<A>) {
      if (op == ReduceOp::kLogSumExp && isfinite(acc)) {
        double s = 0.0;
        for (int64_t r = threadIdx.x; r < p.mid; r += blockDim.x)
          s += exp(static_cast<double>(x[base + p.reducedOffset(r)]) - acc);
        s = blockCombine<A>(ReduceOp::kSum, s, scratch);
        acc += log(s);
      }
    }
    if (threadIdx.x == 0)
      y[o] = static_cast<T>(reduceFinish(op, acc, p.mid));
  }
}

/// ArgMax / ArgMin: one thread per (outer, inner) line along the axis.
template <typename T>
__global__ void argReduceKernel(const T *x, int64_t *y, int64_t outer, int64_t n, int64_t inner,
                                bool isMax, bool last) {
  const int64_t count = outer * inner;
  for (int64_t o = gridStart(); o < count; o += gridStride()) {
    const int64_t a = o / inner, i = o - a * inner;
    y[o] = argReduceLine<T>(x + a * n * inner + i, n, inner, isMax, last);
  }
}

class ArgReduceKernel : public Kernel {
public:
  ArgReduceKernel(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), dtype_(spec.inputs[0].dtype), isMax_(spec.op == "ArgMax"),
        last_(spec.attrInt("select_last_index", 0) != 0) {
    const std::vector<int64_t> &s = spec.inputs[0].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    int64_t axis = spec.attrInt("axis", 0);
    if (axis < 0)
      axis += rank; // the CPU check proved it in range
    for (int64_t k = 0; k < rank; ++k) {
      if (k < axis)
        outer_ *= s[static_cast<size_t>(k)];
      else if (k > axis)
        inner_ *= s[static_cast<size_t>(k)];
    }
    n_ = s[static_cast<size_t>(axis)];
  }

  Status run(const KernelArgs &args) override {
    switch (dtype_) {
    case DType::kInt64:
      return launch<int64_t>(args);
    case DType::kInt32:
      return launch<int32_t>(args);
    default:
      return launch<float>(args);
    }
  }

private:
  template <typename T> Status launch(const KernelArgs &args) {
    argReduceKernel<T><<<gridFor(outer_ * inner_), kBlock, 0, ctx_.stream()>>>(
        static_cast<const T *>(args.inputs[0]), static_cast<int64_t *>(args.outputs[0]), outer_, n_,
        inner_, isMax_, last_);
    return lastLaunchError(where_);
  }

  std::string where_;
  CudaContext &ctx_;
  DType dtype_;
  bool isMax_, last_;
  int64_t outer_ = 1, inner_ = 1, n_ = 0;
};

class ReduceKernel : public Kernel {
public:
  ReduceKernel(const KernelSpec &spec, CudaContext &ctx, ReduceOp op)
      : where_(spec.where()), ctx_(ctx), op_(op), dtype_(spec.inputs[0].dtype),
        outCount_(spec.outputs[0].numElements()),
        numAxes_(spec.inputs.size() == 2 && spec.inputs[1].present() ? spec.inputs[1].numElements()
                                                                     : 0) {
    const std::vector<int64_t> &in = spec.inputs[0].shape, &out = spec.outputs[0].shape;
    shape_.rank = static_cast<int>(in.size());
    shape_.outRank = static_cast<int>(out.size());
    for (size_t d = 0; d < in.size(); ++d)
      shape_.in[d] = in[d];
    for (size_t d = 0; d < out.size(); ++d)
      shape_.out[d] = out[d];
    shape_.keepdims = spec.attrInt("keepdims", 1) != 0;
    shape_.noopWithEmptyAxes = spec.attrInt("noop_with_empty_axes", 0) != 0;
    if (numAxes_ == 0)
      buildReducePlan(shape_, nullptr, 0, plan_);
    // One block per output when the innermost non-1 axis is reduced (contiguous reads within a
    // block); the static shapes tell when keepdims is set or no axes are given, otherwise guess
    // from the sizes.
    int64_t inCount = spec.inputs[0].numElements();
    int64_t mid = outCount_ > 0 ? inCount / outCount_ : 0;
    int last = shape_.rank - 1;
    while (last >= 0 && in[static_cast<size_t>(last)] == 1)
      --last;
    bool innerReduced = mid > outCount_;
    if (numAxes_ == 0)
      innerReduced = plan_.nr > 0 && plan_.redStrides[plan_.nr - 1] == 1;
    else if (shape_.keepdims && last >= 0)
      innerReduced = out[static_cast<size_t>(last)] == 1;
    useBlock_ = innerReduced && mid >= 32;
    useTile_ = !useBlock_ && mid >= 64;
  }

  Status init() {
    if (numAxes_ == 0)
      return Status::ok();
    DTC_ASSIGN_OR_RETURN(planBuffer_, ctx_.allocate(sizeof(ReducePlan), where_ + " (axes plan)"));
    site_ = ctx_.addErrorSite(where_ + ": the axes are out of range, name an axis twice or do "
                                       "not give the plan's output shape");
    return Status::ok();
  }

  Status run(const KernelArgs &args) override {
    const ReducePlan *planPtr = nullptr;
    if (numAxes_ > 0) {
      planPtr = static_cast<const ReducePlan *>(planBuffer_.get());
      reducePlanKernel<<<1, 1, 0, ctx_.stream()>>>(
          shape_, static_cast<const int64_t *>(args.inputs[1]), numAxes_,
          static_cast<ReducePlan *>(planBuffer_.get()), ctx_.errorSlot(), site_);
    }
    if (dtype_ == DType::kInt64)
      launch<int64_t, int64_t>(args, planPtr);
    else
      launch<float, double>(args, planPtr);
    return lastLaunchError(where_);
  }

private:
  template <typename T, typename A> void launch(const KernelArgs &args, const ReducePlan *p) {
    const T *x = static_cast<const T *>(args.inputs[0]);
    T *y = static_cast<T *>(args.outputs[0]);
    if (useBlock_) {
      const unsigned blocks = static_cast<unsigned>(outCount_ < 65536 ? outCount_ : 65536);
      reduceBlockKernel<T, A><<<blocks, kBlock, 0, ctx_.stream()>>>(op_, x, y, outCount_, p, plan_);
    } else if (useTile_) {
      const int64_t tiles = (outCount_ + kTileX - 1) / kTileX;
      const unsigned blocks = static_cast<unsigned>(tiles < 65536 ? tiles : 65536);
      reduceTileKernel<T, A>
          <<<blocks, dim3(kTileX, kTileY), 0, ctx_.stream()>>>(op_, x, y, outCount_, p, plan_);
    } else {
      reduceThreadKernel<T, A>
          <<<gridFor(outCount_), kBlock, 0, ctx_.stream()>>>(op_, x, y, outCount_, p, plan_);
    }
  }

  std::string where_;
  CudaContext &ctx_;
  ReduceOp op_;
  DType dtype_;
  int64_t outCount_;
  int64_t numAxes_;
  ReduceShape shape_{};
  ReducePlan plan_{};
  bool useBlock_ = false, useTile_ = false;
  DeviceBuffer planBuffer_;
  int site_ = 0;
};

} // namespace

Expected<KernelPtr> createArgReduce(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ArgReduceKernel>(spec, ctx));
}

Expected<KernelPtr> createReduce(const KernelSpec &spec, CudaContext &ctx) {
  ReduceOp op;
  if (!reduceOpOf(spec.op, op))
    return spec.error("not a reduction of the CUDA kernels");
  auto k = std::make_unique<ReduceKernel>(spec, ctx, op);
  DTC_RETURN_IF_ERROR(k->init());
  return KernelPtr(std::move(k));
}

} // namespace dtc::ops::cuda
