// CUDA kernels of the elementwise ops: Add, Sub, Mul, Div, Pow, Mod, PRelu (broadcasting), Max,
// Min, Sum, Mean (variadic), the comparisons and And/Or/Xor/Not, IsNaN/IsInf, every unary
// activation and math op of the CPU's Unary family, ai.dtc.EltwiseGrad and ai.dtc.ClipGrad. One
// grid-stride kernel per dtype with the op as a uniform switch (ElementwiseUtil.cuh holds the
// math, shared with the host so the GPU tests check it against the CPU kernels). Each thread reads
// element o of every operand before it writes element o, so an output may overwrite an input of
// its shape. (Dropout is in Generate.cu.)
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/ElementwiseUtil.cuh"

namespace dtc::ops::cuda {

namespace {

using ir::DType;

// ---------------------------------------------------------------------------------------------
// Device kernels.

__global__ void binaryF32Kernel(BinaryOp op, const float *a, const float *b, float *y, int64_t n,
                                Broadcast<2> bc) {
  for (int64_t o = gridStart(); o < n; o += gridStride())
    y[o] = binaryF32(op, a[bc.index(0, o)], b[bc.index(1, o)]);
}

__global__ void binaryI64Kernel(BinaryOp op, const int64_t *a, const int64_t *b, int64_t *y,
                                int64_t n, Broadcast<2> bc, int *errorSlot, int site) {
  for (int64_t o = gridStart(); o < n; o += gridStride()) {
    const int64_t x = a[bc.index(0, o)], v = b[bc.index(1, o)];
    if (op == BinaryOp::kDiv && v == 0)
      reportError(errorSlot, site);
    y[o] = binaryI64(op, x, v);
  }
}

__global__ void powIntKernel(const float *a, const int64_t *e, float *y, int64_t n,
                             Broadcast<2> bc) {
  for (int64_t o = gridStart(); o < n; o += gridStride())
    y[o] = powIntExponent(a[bc.index(0, o)], e[bc.index(1, o)]);
}

/// Mod; an integer zero divisor is reported to the error slot.
template <typename T>
__global__ void modKernel(bool fmod, const T *a, const T *b, T *y, int64_t n, Broadcast<2> bc,
                          int *errorSlot, int site) {
  for (int64_t o = gridStart(); o < n; o += gridStride()) {
    const T x = a[bc.index(0, o)], v = b[bc.index(1, o)];
    if constexpr (!std::is_floating_point_v<T>)
      if (v == 0)
        reportError(errorSlot, site);
    y[o] = modValue<T>(x, v, fmod);
  }
}

/// y[o] = x[ix(o)] (the first input of a variadic op, broadcast to the output).
template <typename T>
__global__ void broadcastCopyKernel(const T *x, T *y, int64_t n, Broadcast<2> bc) {
  for (int64_t o = gridStart(); o < n; o += gridStride())
    y[o] = x[bc.index(0, o)];
}

/// y[o] = combine(y[o], x[ix(o)]) for one further input of Max, Min, Sum, Mean.
template <typename T>
__global__ void accumulateKernel(BinaryOp op, const T *x, T *y, int64_t n, Broadcast<2> bc) {
  for (int64_t o = gridStart(); o < n; o += gridStride()) {
    const T acc = y[o], v = x[bc.index(0, o)];
    if constexpr (std::is_same_v<T, float>)
      y[o] = binaryF32(op, acc, v);
    else if (op == BinaryOp::kMax)
      y[o] = v > acc ? v : acc;
    else
      y[o] = v < acc ? v : acc;
  }
}

__global__ void scaleKernel(float *y, int64_t n, float count) {
  for (int64_t o = gridStart(); o < n; o += gridStride())
    y[o] /= count;
}

/// Comparisons; T = uint8_t is bool (any nonzero byte is true).
template <typename T>
__global__ void compareKernel(CompareOp op, const T *a, const T *b, uint8_t *y, int64_t n,
                              Broadcast<2> bc) {
  for (int64_t o = gridStart(); o < n; o += gridStride()) {
    const T x = a[bc.index(0, o)], v = b[bc.index(1, o)];
    if constexpr (std::is_same_v<T, uint8_t>)
      y[o] = (x != 0) == (v != 0) ? 1 : 0;
    else
      y[o] = compareValues(op, x, v) ? 1 : 0;
  }
}

/// And (0), Or (1), Xor (2) over bool bytes.
__global__ void logicalKernel(int op, const uint8_t *a, const uint8_t *b, uint8_t *y, int64_t n,
                              Broadcast<2> bc) {
  for (int64_t o = gridStart(); o < n; o += gridStride()) {
    const bool x = a[bc.index(0, o)] != 0, v = b[bc.index(1, o)] != 0;
    y[o] = (op == 0 ? (x && v) : op == 1 ? (x || v) : (x != v)) ? 1 : 0;
  }
}

__global__ void notKernel(const uint8_t *x, uint8_t *y, int64_t n) {
  for (int64_t o = gridStart(); o < n; o += gridStride())
    y[o] = x[o] == 0 ? 1 : 0;
}

/// IsNaN (isNaN) or IsInf with its detect_positive / detect_negative.
__global__ void floatClassKernel(bool isNaN, bool pos, bool neg, const float *x, uint8_t *y,
                                 int64_t n) {
  for (int64_t o = gridStart(); o < n; o += gridStride()) {
    const float v = x[o];
    y[o] = isNaN ? (v != v ? 1 : 0) : (isinf(v) && (v > 0.f ? pos : neg) ? 1 : 0);
  }
}

/// f32 unary ops; Clip reads its optional bounds from the device (lo/hi null: no bound).
__global__ void unaryF32Kernel(UnaryOp op, const float *x, float *y, int64_t n, float alpha,
                               float beta, const float *lo, const float *hi) {
  if (op == UnaryOp::kClip) {
    alpha = lo ? *lo : -INFINITY;
    beta = hi ? *hi : INFINITY;
  }
  for (int64_t o = gridStart(); o < n; o += gridStride())
    y[o] = unaryF32(op, x[o], alpha, beta);
}

__global__ void unaryI64Kernel(UnaryOp op, const int64_t *x, int64_t *y, int64_t n,
                               const int64_t *lo, const int64_t *hi) {
  const int64_t l = lo ? *lo : INT64_MIN, h = hi ? *hi : INT64_MAX;
  for (int64_t o = gridStart(); o < n; o += gridStride())
    y[o] = unaryI64(op, x[o], l, h);
}

__global__ void eltwiseGradKernel(GradAlg alg, const float *dy, const float *t, float *dx,
                                  int64_t n, float alpha, float beta) {
  for (int64_t o = gridStart(); o < n; o += gridStride())
    dx[o] = eltwiseGradF32(alg, dy[o], t[o], alpha, beta);
}

__global__ void clipGradKernel(const float *dy, const float *x, float *dx, int64_t n,
                               const float *lo, const float *hi) {
  const float l = lo ? *lo : -INFINITY, h = hi ? *hi : INFINITY;
  for (int64_t o = gridStart(); o < n; o += gridStride())
    dx[o] = clipGradF32(dy[o], x[o], l, h);
}

// ---------------------------------------------------------------------------------------------
// Kernel objects.

/// The broadcast of `in` (and `other`, when given) to `out`; the check proved it fits.
Broadcast<2> broadcastOf(const std::vector<int64_t> &out, const std::vector<int64_t> &a,
                         const std::vector<int64_t> &b) {
  Broadcast<2> bc;
  makeBroadcast<2>(out, {a, b}, bc);
  return bc;
}

/// An optional input's pointer (null when omitted).
const void *optionalInput(const KernelArgs &args, size_t i) {
  return i < args.numInputs ? args.inputs[i] : nullptr;
}

class ElementwiseKernelBase : public Kernel {
public:
  ElementwiseKernelBase(const KernelSpec &spec, CudaContext &ctx)
      : where_(spec.where()), ctx_(ctx), n_(spec.outputs[0].numElements()) {}

protected:
  unsigned grid() const { return gridFor(n_); }
  std::string where_;
  CudaContext &ctx_;
  int64_t n_;
};

class BinaryKernel : public ElementwiseKernelBase {
public:
  BinaryKernel(const KernelSpec &spec, CudaContext &ctx)
      : ElementwiseKernelBase(spec, ctx), dtype_(spec.outputs[0].dtype),
        intExponent_(spec.op == "Pow" && spec.inputs[1].dtype == DType::kInt64),
        bc_(broadcastOf(spec.outputs[0].shape, spec.inputs[0].shape, spec.inputs[1].shape)) {
    op_ = spec.op == "Add"   ? BinaryOp::kAdd
          : spec.op == "Sub" ? BinaryOp::kSub
          : spec.op == "Mul" ? BinaryOp::kMul
          : spec.op == "Div" ? BinaryOp::kDiv
          : spec.op == "Pow" ? BinaryOp::kPow
                             : BinaryOp::kPRelu;
    if (dtype_ == DType::kInt64)
      site_ = ctx.addErrorSite(where_ + ": integer division by zero");
  }

  Status run(const KernelArgs &args) override {
    cudaStream_t s = ctx_.stream();
    if (intExponent_)
      powIntKernel<<<grid(), kBlock, 0, s>>>(static_cast<const float *>(args.inputs[0]),
                                             static_cast<const int64_t *>(args.inputs[1]),
                                             static_cast<float *>(args.outputs[0]), n_, bc_);
    else if (dtype_ == DType::kInt64)
      binaryI64Kernel<<<grid(), kBlock, 0, s>>>(op_, static_cast<const int64_t *>(args.inputs[0]),
                                                static_cast<const int64_t *>(args.inputs[1]),
                                                static_cast<int64_t *>(args.outputs[0]), n_, bc_,
                                                ctx_.errorSlot(), site_);
    else
      binaryF32Kernel<<<grid(), kBlock, 0, s>>>(op_, static_cast<const float *>(args.inputs[0]),
                                                static_cast<const float *>(args.inputs[1]),
                                                static_cast<float *>(args.outputs[0]), n_, bc_);
    return lastLaunchError(where_);
  }

private:
  DType dtype_;
  bool intExponent_;
  BinaryOp op_;
  Broadcast<2> bc_;
  int site_ = 0;
};

class ModKernel : public ElementwiseKernelBase {
public:
  ModKernel(const KernelSpec &spec, CudaContext &ctx)
      : ElementwiseKernelBase(spec, ctx), dtype_(spec.outputs[0].dtype),
        fmod_(spec.attrInt("fmod", 0) != 0),
        bc_(broadcastOf(spec.outputs[0].shape, spec.inputs[0].shape, spec.inputs[1].shape)) {
    if (dtype_ != DType::kFloat32)
      site_ = ctx.addErrorSite(where_ + ": integer division by zero");
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
    modKernel<T><<<grid(), kBlock, 0, ctx_.stream()>>>(
        fmod_, static_cast<const T *>(args.inputs[0]), static_cast<const T *>(args.inputs[1]),
        static_cast<T *>(args.outputs[0]), n_, bc_, ctx_.errorSlot(), site_);
    return lastLaunchError(where_);
  }

  DType dtype_;
  bool fmod_;
  Broadcast<2> bc_;
  int site_ = 0;
};

class VariadicKernel : public ElementwiseKernelBase {
public:
  VariadicKernel(const KernelSpec &spec, CudaContext &ctx)
      : ElementwiseKernelBase(spec, ctx), dtype_(spec.outputs[0].dtype), mean_(spec.op == "Mean") {
    op_ = spec.op == "Max" ? BinaryOp::kMax : spec.op == "Min" ? BinaryOp::kMin : BinaryOp::kAdd;
    for (const TensorDesc &t : spec.inputs)
      bcs_.push_back(broadcastOf(spec.outputs[0].shape, t.shape, spec.outputs[0].shape));
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
    cudaStream_t s = ctx_.stream();
    T *y = static_cast<T *>(args.outputs[0]);
    // Input 0 may be the output's own buffer (in place): the copy reads element o first.
    broadcastCopyKernel<T>
        <<<grid(), kBlock, 0, s>>>(static_cast<const T *>(args.inputs[0]), y, n_, bcs_[0]);
    for (size_t k = 1; k < bcs_.size(); ++k)
      accumulateKernel<T>
          <<<grid(), kBlock, 0, s>>>(op_, static_cast<const T *>(args.inputs[k]), y, n_, bcs_[k]);
    if constexpr (std::is_same_v<T, float>)
      if (mean_ && bcs_.size() > 1)
        scaleKernel<<<grid(), kBlock, 0, s>>>(y, n_, static_cast<float>(bcs_.size()));
    return lastLaunchError(where_);
  }

  DType dtype_;
  bool mean_;
  BinaryOp op_;
  std::vector<Broadcast<2>> bcs_;
};

class CompareKernel : public ElementwiseKernelBase {
public:
  CompareKernel(const KernelSpec &spec, CudaContext &ctx)
      : ElementwiseKernelBase(spec, ctx), dtype_(spec.inputs[0].dtype),
        bc_(broadcastOf(spec.outputs[0].shape, spec.inputs[0].shape, spec.inputs[1].shape)) {
    op_ = spec.op == "Equal"         ? CompareOp::kEqual
          : spec.op == "Less"        ? CompareOp::kLess
          : spec.op == "LessOrEqual" ? CompareOp::kLessOrEqual
          : spec.op == "Greater"     ? CompareOp::kGreater
                                     : CompareOp::kGreaterOrEqual;
  }

  Status run(const KernelArgs &args) override {
    switch (dtype_) {
    case DType::kInt64:
      return launch<int64_t>(args);
    case DType::kInt32:
      return launch<int32_t>(args);
    case DType::kBool:
      return launch<uint8_t>(args);
    default:
      return launch<float>(args);
    }
  }

private:
  template <typename T> Status launch(const KernelArgs &args) {
    compareKernel<T><<<grid(), kBlock, 0, ctx_.stream()>>>(
        op_, static_cast<const T *>(args.inputs[0]), static_cast<const T *>(args.inputs[1]),
        static_cast<uint8_t *>(args.outputs[0]), n_, bc_);
    return lastLaunchError(where_);
  }

  DType dtype_;
  CompareOp op_;
  Broadcast<2> bc_;
};

class LogicalKernel : public ElementwiseKernelBase {
public:
  LogicalKernel(const KernelSpec &spec, CudaContext &ctx)
      : ElementwiseKernelBase(spec, ctx), op_(spec.op == "And"  ? 0
                                              : spec.op == "Or" ? 1
                                                                : 2),
        bc_(broadcastOf(spec.outputs[0].shape, spec.inputs[0].shape, spec.inputs[1].shape)) {}

  Status run(const KernelArgs &args) override {
    logicalKernel<<<grid(), kBlock, 0, ctx_.stream()>>>(
        op_, static_cast<const uint8_t *>(args.inputs[0]),
        static_cast<const uint8_t *>(args.inputs[1]), static_cast<uint8_t *>(args.outputs[0]), n_,
        bc_);
    return lastLaunchError(where_);
  }

private:
  int op_;
  Broadcast<2> bc_;
};

class NotKernel : public ElementwiseKernelBase {
public:
  using ElementwiseKernelBase::ElementwiseKernelBase;
  Status run(const KernelArgs &args) override {
    notKernel<<<grid(), kBlock, 0, ctx_.stream()>>>(static_cast<const uint8_t *>(args.inputs[0]),
                                                    static_cast<uint8_t *>(args.outputs[0]), n_);
    return lastLaunchError(where_);
  }
};

class FloatClassKernel : public ElementwiseKernelBase {
public:
  FloatClassKernel(const KernelSpec &spec, CudaContext &ctx)
      : ElementwiseKernelBase(spec, ctx), isNaN_(spec.op == "IsNaN"),
        pos_(spec.attrInt("detect_positive", 1) != 0),
        neg_(spec.attrInt("detect_negative", 1) != 0) {}
  Status run(const KernelArgs &args) override {
    floatClassKernel<<<grid(), kBlock, 0, ctx_.stream()>>>(
        isNaN_, pos_, neg_, static_cast<const float *>(args.inputs[0]),
        static_cast<uint8_t *>(args.outputs[0]), n_);
    return lastLaunchError(where_);
  }

private:
  bool isNaN_, pos_, neg_;
};

class UnaryKernel : public ElementwiseKernelBase {
public:
  UnaryKernel(const KernelSpec &spec, CudaContext &ctx, UnaryOp op)
      : ElementwiseKernelBase(spec, ctx), op_(op), dtype_(spec.inputs[0].dtype) {
    unaryAttrs(spec, op, alpha_, beta_);
  }

  Status run(const KernelArgs &args) override {
    const void *lo = optionalInput(args, 1), *hi = optionalInput(args, 2);
    if (dtype_ == DType::kInt64)
      unaryI64Kernel<<<grid(), kBlock, 0, ctx_.stream()>>>(
          op_, static_cast<const int64_t *>(args.inputs[0]),
          static_cast<int64_t *>(args.outputs[0]), n_, static_cast<const int64_t *>(lo),
          static_cast<const int64_t *>(hi));
    else
      unaryF32Kernel<<<grid(), kBlock, 0, ctx_.stream()>>>(
          op_, static_cast<const float *>(args.inputs[0]), static_cast<float *>(args.outputs[0]),
          n_, alpha_, beta_, static_cast<const float *>(lo), static_cast<const float *>(hi));
    return lastLaunchError(where_);
  }

private:
  UnaryOp op_;
  DType dtype_;
  float alpha_ = 0.f, beta_ = 0.f;
};

class EltwiseGradKernel : public ElementwiseKernelBase {
public:
  EltwiseGradKernel(const KernelSpec &spec, CudaContext &ctx, GradAlg alg)
      : ElementwiseKernelBase(spec, ctx), alg_(alg), alpha_(spec.attrFloat("alpha", 0.f)),
        beta_(spec.attrFloat("beta", 0.f)) {}
  Status run(const KernelArgs &args) override {
    eltwiseGradKernel<<<grid(), kBlock, 0, ctx_.stream()>>>(
        alg_, static_cast<const float *>(args.inputs[0]),
        static_cast<const float *>(args.inputs[1]), static_cast<float *>(args.outputs[0]), n_,
        alpha_, beta_);
    return lastLaunchError(where_);
  }

private:
  GradAlg alg_;
  float alpha_, beta_;
};

class ClipGradKernel : public ElementwiseKernelBase {
public:
  using ElementwiseKernelBase::ElementwiseKernelBase;
  Status run(const KernelArgs &args) override {
    clipGradKernel<<<grid(), kBlock, 0, ctx_.stream()>>>(
        static_cast<const float *>(args.inputs[0]), static_cast<const float *>(args.inputs[1]),
        static_cast<float *>(args.outputs[0]), n_,
        static_cast<const float *>(optionalInput(args, 2)),
        static_cast<const float *>(optionalInput(args, 3)));
    return lastLaunchError(where_);
  }
};

} // namespace

Expected<KernelPtr> createBinary(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<BinaryKernel>(spec, ctx));
}

Expected<KernelPtr> createMod(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ModKernel>(spec, ctx));
}

Expected<KernelPtr> createVariadic(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<VariadicKernel>(spec, ctx));
}

Expected<KernelPtr> createCompare(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<CompareKernel>(spec, ctx));
}

Expected<KernelPtr> createLogical(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<LogicalKernel>(spec, ctx));
}

Expected<KernelPtr> createNot(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<NotKernel>(spec, ctx));
}

Expected<KernelPtr> createFloatClass(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<FloatClassKernel>(spec, ctx));
}

Expected<KernelPtr> createUnary(const KernelSpec &spec, CudaContext &ctx) {
  UnaryOp op;
  if (!unaryOpOf(spec.op, spec.attrString("approximate", "none"), op))
    return spec.error("not a unary op of the CUDA elementwise kernels");
  return KernelPtr(std::make_unique<UnaryKernel>(spec, ctx, op));
}

Expected<KernelPtr> createEltwiseGrad(const KernelSpec &spec, CudaContext &ctx) {
  GradAlg alg;
  const std::string name = spec.attrString("algorithm", "");
  if (!gradAlgOf(name, alg))
    return spec.error("unknown algorithm '" + name + "'");
  return KernelPtr(std::make_unique<EltwiseGradKernel>(spec, ctx, alg));
}

Expected<KernelPtr> createClipGrad(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<ClipGradKernel>(spec, ctx));
}

} // namespace dtc::ops::cuda
