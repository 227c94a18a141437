// CUDA kernels of MatMul (numpy matmul: batch dims broadcast, 1-D operands promoted), ai.dtc.
// MatMulT (transA / transB swap an operand's last two axes, alpha) and Gemm (Y = alpha * A' * B'
// + beta * C, C broadcast to [M, N]) on cublasSgemmStridedBatched. cuBLAS is column-major: the
// row-major product Y[M, N] = op(A) op(B) is computed as the column-major Y^T = op(B)^T op(A)^T,
// i.e. with the operands swapped, and a row-major operand read as column-major is its transpose.
// Broadcast batch dims get stride 0; batch dims that cannot be expressed by one stride are
// iterated on the host (one cuBLAS call per outer index, offsets computed at creation). bf16
// operands (--precision bf16) go through cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F
// (f32 accumulation, the result rounded to bf16 once, as oneDNN does on the CPU).
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DenseUtil.h"

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

class GemmKernel : public Kernel {
public:
  GemmKernel(const KernelSpec &spec, CudaContext &ctx, GemmPlan plan)
      : where_(spec.where()), ctx_(ctx), p_(std::move(plan)),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())),
        bf16_(spec.inputs[0].dtype == ir::DType::kBFloat16) {}

  Status run(const KernelArgs &args) override {
    if (bf16_)
      return runBf16(args);
    float *y = static_cast<float *>(args.outputs[0]);
    const float *a = static_cast<const float *>(args.inputs[0]);
    const float *b = static_cast<const float *>(args.inputs[1]);
    if (outBytes_ == 0)
      return Status::ok();
    float beta = 0.f;
    if (p_.hasC) {
      // Y = broadcast(C) first (beta * C for an empty K); the product adds beta times it.
      int e = launchBroadcastC(p_, static_cast<const float *>(args.inputs[2]),
                               p_.k == 0 ? p_.beta : 1.f, y, ctx_.stream());
      if (e != 0)
        return cudaStatus(static_cast<cudaError_t>(e), where_, "the broadcast of C");
      beta = p_.beta;
      if (p_.k == 0)
        return Status::ok();
    } else if (p_.k == 0) { // a sum over nothing
      DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemsetAsync(y, 0, outBytes_, ctx_.stream()));
      return Status::ok();
    }
    // Column-major Y^T[N, M] = op(B)^T[N, K] op(A)^T[K, M].
    ColumnMajorGemm g = columnMajor(p_);
    cublasOperation_t op1 = g.trans1 ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op2 = g.trans2 ? CUBLAS_OP_T : CUBLAS_OP_N;
    for (const GemmCall &c : p_.calls)
      DTC_CUBLAS_RETURN_IF_ERROR(
          where_, cublasSgemmStridedBatched(
                      ctx_.cublas(), op1, op2, static_cast<int>(g.rows), static_cast<int>(g.cols),
                      static_cast<int>(g.depth), &p_.alpha, b + c.b, static_cast<int>(g.ld1),
                      p_.strideB, a + c.a, static_cast<int>(g.ld2), p_.strideA, &beta, y + c.y,
                      static_cast<int>(g.ldy), p_.m * p_.n, static_cast<int>(p_.batch)));
    return Status::ok();
  }

  /// bf16 A, B and Y (no C: checked), f32 alpha/beta and accumulation.
  Status runBf16(const KernelArgs &args) {
    if (outBytes_ == 0)
      return Status::ok();
    if (p_.k == 0) {
      DTC_CUDA_RETURN_IF_ERROR(where_,
                               cudaMemsetAsync(args.outputs[0], 0, outBytes_, ctx_.stream()));
      return Status::ok();
    }
    using Bits = uint16_t; // bf16 storage: offsets and strides count elements
    Bits *y = static_cast<Bits *>(args.outputs[0]);
    const Bits *a = static_cast<const Bits *>(args.inputs[0]);
    const Bits *b = static_cast<const Bits *>(args.inputs[1]);
    const float beta = 0.f;
    ColumnMajorGemm g = columnMajor(p_);
    cublasOperation_t op1 = g.trans1 ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op2 = g.trans2 ? CUBLAS_OP_T : CUBLAS_OP_N;
    for (const GemmCall &c : p_.calls)
      DTC_CUBLAS_RETURN_IF_ERROR(
          where_,
          cublasGemmStridedBatchedEx(
              ctx_.cublas(), op1, op2, static_cast<int>(g.rows), static_cast<int>(g.cols),
              static_cast<int>(g.depth), &p_.alpha, b + c.b, CUDA_R_16BF, static_cast<int>(g.ld1),
              p_.strideB, a + c.a, CUDA_R_16BF, static_cast<int>(g.ld2), p_.strideA, &beta, y + c.y,
              CUDA_R_16BF, static_cast<int>(g.ldy), p_.m * p_.n, static_cast<int>(p_.batch),
              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return Status::ok();
  }

  std::string where_;
  CudaContext &ctx_;
  GemmPlan p_;
  size_t outBytes_;
  bool bf16_;
};

} // namespace

Expected<KernelPtr> createMatMul(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<GemmKernel>(spec, ctx, gemmPlan(spec)));
}

Expected<KernelPtr> createMatMulT(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<GemmKernel>(spec, ctx, gemmPlan(spec)));
}

Expected<KernelPtr> createGemm(const KernelSpec &spec, CudaContext &ctx) {
  return KernelPtr(std::make_unique<GemmKernel>(spec, ctx, gemmPlan(spec)));
}

} // namespace dtc::ops::cuda
