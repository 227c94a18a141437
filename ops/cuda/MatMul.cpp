// CUDA kernels of MatMul (numpy matmul: batch dims broadcast, 1-D operands promoted), ai.dtc.
// MatMulT (transA / transB swap an operand's last two axes, alpha) and Gemm (Y = alpha * A' * B'
// + beta * C, C broadcast to [M, N]) on cublasSgemmStridedBatched. cuBLAS is column-major: the
// row-major product Y[M, N] = op(A) op(B) is computed as the column-major Y^T = op(B)^T op(A)^T,
// i.e. with the operands swapped, and a row-major operand read as column-major is its transpose.
// Broadcast batch dims get stride 0; batch dims that cannot be expressed by one stride are
// iterated on the host (one cuBLAS call per outer index, offsets computed at creation).
#include "ops/cuda/CudaKernel.h"
#include "ops/cuda/DenseUtil.h"

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

/// One strided-batched call's operand offsets (elements) into A, B and Y.
struct GemmCall {
  int64_t a = 0, b = 0, y = 0;
};

/// A batched row-major product Y[batch..., M, N] = alpha * op(A) op(B) (+ beta * Y).
struct GemmPlan {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.f;
  int64_t batch = 1;               ///< inner batch count of each call
  int64_t strideA = 0, strideB = 0; ///< inner batch strides (elements; 0 = broadcast)
  std::vector<GemmCall> calls;     ///< one per outer batch index
};

/// Fills the batch part of `p` from the operands' batch dims (each padded on the left with 1s
/// to the output's batch rank). An operand's dim of 1 against an output dim > 1 is broadcast.
void planBatches(GemmPlan &p, std::vector<int64_t> a, std::vector<int64_t> b,
                 const std::vector<int64_t> &out) {
  size_t r = out.size();
  a.insert(a.begin(), r - a.size(), 1);
  b.insert(b.begin(), r - b.size(), 1);
  // Element strides of each batch dim in A, B and Y (0 where broadcast), dims of 1 dropped.
  struct Dim {
    int64_t size, sa, sb, sy;
  };
  std::vector<Dim> dims;
  int64_t sa = p.m * p.k, sb = p.k * p.n, sy = p.m * p.n;
  for (size_t i = r; i-- > 0;) {
    if (out[i] != 1)
      dims.insert(dims.begin(), Dim{out[i], a[i] == 1 ? 0 : sa, b[i] == 1 ? 0 : sb, sy});
    sa *= a[i];
    sb *= b[i];
    sy *= out[i];
  }
  // Merge a dim into the next (inner) one when one stride describes both, in every operand.
  std::vector<Dim> merged;
  for (const Dim &d : dims) {
    if (!merged.empty()) {
      Dim &last = merged.back();
      if (last.sa == d.sa * d.size && last.sb == d.sb * d.size && last.sy == d.sy * d.size) {
        last = Dim{last.size * d.size, d.sa, d.sb, d.sy};
        continue;
      }
    }
    merged.push_back(d);
  }
  if (merged.empty()) {
    p.calls.push_back(GemmCall{});
    return;
  }
  Dim inner = merged.back();
  merged.pop_back();
  p.batch = inner.size;
  p.strideA = inner.sa;
  p.strideB = inner.sb;
  // Outer indices, row-major.
  std::vector<int64_t> idx(merged.size(), 0);
  while (true) {
    GemmCall c;
    for (size_t i = 0; i < merged.size(); ++i) {
      c.a += idx[i] * merged[i].sa;
      c.b += idx[i] * merged[i].sb;
      c.y += idx[i] * merged[i].sy;
    }
    p.calls.push_back(c);
    size_t i = merged.size();
    while (i > 0 && ++idx[i - 1] == merged[i - 1].size)
      idx[--i] = 0;
    if (i == 0)
      break;
  }
}

class GemmKernel : public Kernel {
public:
  GemmKernel(const KernelSpec &spec, CudaContext &ctx, GemmPlan plan)
      : where_(spec.where()), ctx_(ctx), p_(std::move(plan)),
        outBytes_(static_cast<size_t>(spec.outputs[0].byteSize())) {}

  Status run(const KernelArgs &args) override {
    float *y = static_cast<float *>(args.outputs[0]);
    const float *a = static_cast<const float *>(args.inputs[0]);
    const float *b = static_cast<const float *>(args.inputs[1]);
    if (outBytes_ == 0)
      return Status::ok();
    float beta = 0.f;
    if (hasC_) {
      // Y = scale * broadcast(C) first; the product then adds to it (beta = 1).
      float scale = p_.k == 0 ? cScale_ : 1.f;
      int e = launchBroadcast2D(y, static_cast<const float *>(args.inputs[2]), p_.m, p_.n, cm_,
                                cn_, scale, ctx_.stream());
      DTC_CUDA_RETURN_IF_ERROR(where_, static_cast<cudaError_t>(e));
      beta = cScale_;
      if (p_.k == 0)
        return Status::ok();
    } else if (p_.k == 0) { // a sum over nothing
      DTC_CUDA_RETURN_IF_ERROR(where_, cudaMemsetAsync(y, 0, outBytes_, ctx_.stream()));
      return Status::ok();
    }
    // Column-major Y^T[N, M] = op(B)^T[N, K] op(A)^T[K, M].
    cublasOperation_t opB = p_.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = p_.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    int n = static_cast<int>(p_.n), m = static_cast<int>(p_.m), k = static_cast<int>(p_.k);
    int ldb = static_cast<int>(std::max<int64_t>(1, p_.transB ? p_.k : p_.n));
    int lda = static_cast<int>(std::max<int64_t>(1, p_.transA ? p_.m : p_.k));
    int ldy = static_cast<int>(std::max<int64_t>(1, p_.n));
    for (const GemmCall &c : p_.calls)
      DTC_CUBLAS_RETURN_IF_ERROR(
          where_, cublasSgemmStridedBatched(ctx_.cublas(), opB, opA, n, m, k, &p_.alpha, b + c.b,
                                            ldb, p_.strideB, a + c.a, lda, p_.strideA, &beta,
                                            y + c.y, ldy, p_.m * p_.n,
                                            static_cast<int>(p_.batch)));
    return Status::ok();
  }

  std::string where_;
  CudaContext &ctx_;
  GemmPlan p_;
  size_t outBytes_;
  bool hasC_ = false;
  float cScale_ = 0.f; ///< beta
  int64_t cm_ = 1, cn_ = 1;
};

} // namespace

Expected<KernelPtr> createMatMul(const KernelSpec &spec, CudaContext &ctx) {
  std::vector<int64_t> a = spec.inputs[0].shape, b = spec.inputs[1].shape;
  if (a.size() == 1)
    a.insert(a.begin(), 1);
  if (b.size() == 1)
    b.push_back(1);
  GemmPlan p;
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  std::vector<int64_t> batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  std::vector<int64_t> out(std::max(batchA.size(), batchB.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    size_t ia = i + batchA.size(), ib = i + batchB.size();
    int64_t da = ia >= out.size() ? batchA[ia - out.size()] : 1;
    int64_t db = ib >= out.size() ? batchB[ib - out.size()] : 1;
    out[i] = da == 1 ? db : da;
  }
  planBatches(p, batchA, batchB, out);
  return KernelPtr(std::make_unique<GemmKernel>(spec, ctx, std::move(p)));
}

Expected<KernelPtr> createMatMulT(const KernelSpec &spec, CudaContext &ctx) {
  const auto &a = spec.inputs[0].shape, &b = spec.inputs[1].shape;
  GemmPlan p;
  p.transA = spec.attrInt("transA", 0) != 0;
  p.transB = spec.attrInt("transB", 0) != 0;
  p.alpha = spec.attrFloat("alpha", 1.f);
  size_t ra = a.size(), rb = b.size();
  p.m = a[p.transA ? ra - 1 : ra - 2];
  p.k = a[p.transA ? ra - 2 : ra - 1];
  p.n = b[p.transB ? rb - 2 : rb - 1];
  const auto &y = spec.outputs[0].shape;
  planBatches(p, std::vector<int64_t>(a.begin(), a.end() - 2),
              std::vector<int64_t>(b.begin(), b.end() - 2),
              std::vector<int64_t>(y.begin(), y.end() - 2));
  return KernelPtr(std::make_unique<GemmKernel>(spec, ctx, std::move(p)));
}

Expected<KernelPtr> createGemm(const KernelSpec &spec, CudaContext &ctx) {
  const auto &a = spec.inputs[0].shape, &b = spec.inputs[1].shape;
  GemmPlan p;
  p.transA = spec.attrInt("transA", 0) != 0;
  p.transB = spec.attrInt("transB", 0) != 0;
  p.alpha = spec.attrFloat("alpha", 1.f);
  p.m = p.transA ? a[1] : a[0];
  p.k = p.transA ? a[0] : a[1];
  p.n = p.transB ? b[0] : b[1];
  p.calls.push_back(GemmCall{});
  float beta = spec.attrFloat("beta", 1.f);
  auto k = std::make_unique<GemmKernel>(spec, ctx, std::move(p));
  if (spec.inputs.size() == 3 && spec.inputs[2].present() && beta != 0.f) {
    std::vector<int64_t> c = spec.inputs[2].shape;
    while (c.size() < 2)
      c.insert(c.begin(), 1);
    k->hasC_ = true;
    k->cScale_ = beta;
    k->cm_ = c[0];
    k->cn_ = c[1];
  }
  return KernelPtr(std::move(k));
}

} // namespace dtc::ops::cuda
