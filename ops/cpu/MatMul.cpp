// CPU kernels of MatMul (numpy matmul: batch broadcasting, 1-D operands promoted and their dim
// removed from the result) and Gemm (Y = alpha * A' * B' + beta * C, C broadcast to [M,N]), on
// the oneDNN matmul primitive with static shapes. Gemm's transposes are expressed as strides;
// C is either the matmul bias (alpha = beta = 1) or copied into Y before a sum post-op (beta).
// f32, or bf16 for mixed precision (every operand bf16; oneDNN accumulates in f32).
#include "compiler/ir/Half.h"
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>
#include <cstring>

namespace dtc::ops::cpu {

namespace {

/// The matmul problem of a MatMul spec: operand dims padded to one rank >= 2.
struct MatMulDims {
  std::vector<int64_t> a, b, out; ///< [batch..., M, K], [batch..., K, N], [batch..., M, N]
};

Expected<MatMulDims> matmulDims(const KernelSpec &spec) {
  std::vector<int64_t> a = spec.inputs[0].shape, b = spec.inputs[1].shape;
  if (a.empty() || b.empty())
    return spec.error("MatMul operands must have rank >= 1, got " + shapeStr(a) + " and " +
                      shapeStr(b));
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec)
    a.insert(a.begin(), 1);
  if (bVec)
    b.push_back(1);
  if (a.back() != b[b.size() - 2])
    return spec.error("inner dimensions differ: " + shapeStr(spec.inputs[0].shape) + " x " +
                      shapeStr(spec.inputs[1].shape));
  std::vector<int64_t> batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2), batch;
  if (!broadcastShapes(batchA, batchB, batch))
    return spec.error("batch dimensions " + shapeStr(batchA) + " and " + shapeStr(batchB) +
                      " do not broadcast");
  MatMulDims d;
  d.a.assign(batch.size() - batchA.size(), 1);
  d.a.insert(d.a.end(), a.begin(), a.end());
  d.b.assign(batch.size() - batchB.size(), 1);
  d.b.insert(d.b.end(), b.begin(), b.end());
  d.out = batch;
  d.out.push_back(a[a.size() - 2]);
  d.out.push_back(b.back());
  return d;
}

/// Expected numpy output shape: out without the promoted dims of 1-D operands.
std::vector<int64_t> matmulOutShape(const KernelSpec &spec, const MatMulDims &d) {
  std::vector<int64_t> out(d.out.begin(), d.out.end() - 2);
  if (spec.inputs[0].shape.size() > 1)
    out.push_back(d.out[d.out.size() - 2]);
  if (spec.inputs[1].shape.size() > 1)
    out.push_back(d.out.back());
  return out;
}

/// Gemm and MatMul: one matmul primitive, with C prefilled into the output for a sum post-op
/// (prefillC_), or C as bias (bound in the runner), or an empty K (output = beta * C or 0).
class MatMulKernel : public Kernel {
public:
  MatMulKernel(const KernelSpec &spec, CpuContext &ctx)
      : where_(spec.where()), ctx_(ctx), outBytes_(spec.outputs[0].byteSize()),
        bf16_(spec.inputs[0].dtype == ir::DType::kBFloat16) {}

  Status run(const KernelArgs &args) override {
    if (prefillC_ && bf16_) {
      const uint16_t *c = static_cast<const uint16_t *>(args.inputs[2]);
      uint16_t *y = static_cast<uint16_t *>(args.outputs[0]);
      for (int64_t m = 0; m < m_; ++m)
        for (int64_t n = 0; n < n_; ++n)
          y[m * n_ + n] = ir::floatToBFloat16(
              ir::bfloat16ToFloat(c[(cm_ == 1 ? 0 : m) * cn_ + (cn_ == 1 ? 0 : n)]) * cScale_);
    } else if (prefillC_) {
      const float *c = static_cast<const float *>(args.inputs[2]);
      float *y = static_cast<float *>(args.outputs[0]);
      for (int64_t m = 0; m < m_; ++m)
        for (int64_t n = 0; n < n_; ++n)
          y[m * n_ + n] = c[(cm_ == 1 ? 0 : m) * cn_ + (cn_ == 1 ? 0 : n)] * cScale_;
    } else if (emptyK_) {
      std::memset(args.outputs[0], 0, static_cast<size_t>(outBytes_));
    }
    if (emptyK_)
      return Status::ok();
    try {
      runner_.execute(args);
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(where_, std::string("oneDNN: ") + e.what());
    }
    return Status::ok();
  }

  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner runner_;
  int64_t outBytes_ = 0;
  bool bf16_ = false;
  bool prefillC_ = false, emptyK_ = false;
  float cScale_ = 1.f;
  int64_t m_ = 0, n_ = 0, cm_ = 1, cn_ = 1;
};

} // namespace

Status checkMatMul(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDenseFloatDTypes(spec));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_ASSIGN_OR_RETURN(MatMulDims d, matmulDims(spec));
  if (d.out.size() > 12)
    return spec.error("rank " + std::to_string(d.out.size()) + " exceeds 12");
  return checkOutputShape(spec, matmulOutShape(spec, d));
}

Expected<KernelPtr> createMatMul(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(MatMulDims d, matmulDims(spec));
  auto k = std::make_unique<MatMulKernel>(spec, ctx);
  if (d.a.back() == 0) {
    k->emptyK_ = true;
    return KernelPtr(std::move(k));
  }
  return buildKernel(spec, [&]() -> KernelPtr {
    const dnnl::memory::data_type dt = dnnlFloatType(spec.inputs[0].dtype);
    dnnl::memory::desc a = plainDesc(d.a, dt), b = plainDesc(d.b, dt), y = plainDesc(d.out, dt);
    dnnl::matmul::desc md(a, b, y);
    dnnl::matmul::primitive_desc pd(md, ctx.engine);
    k->runner_ = PrimitiveRunner(dnnl::matmul(pd), ctx);
    k->runner_.input(DNNL_ARG_SRC, a, 0);
    k->runner_.input(DNNL_ARG_WEIGHTS, b, 1);
    k->runner_.output(DNNL_ARG_DST, y, 0);
    return std::move(k);
  });
}

Status checkGemm(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1));
  DTC_RETURN_IF_ERROR(checkDenseFloatDTypes(spec));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const auto &a = spec.inputs[0].shape, &b = spec.inputs[1].shape;
  if (a.size() != 2 || b.size() != 2)
    return spec.error("A and B must be 2-D, got " + shapeStr(a) + " and " + shapeStr(b));
  int64_t transA = spec.attrInt("transA", 0), transB = spec.attrInt("transB", 0);
  if ((transA != 0 && transA != 1) || (transB != 0 && transB != 1))
    return spec.error("transA and transB must be 0 or 1");
  int64_t m = transA ? a[1] : a[0], ka = transA ? a[0] : a[1];
  int64_t kb = transB ? b[1] : b[0], n = transB ? b[0] : b[1];
  if (ka != kb)
    return spec.error("inner dimensions differ: A " + shapeStr(a) +
                      " (transA=" + std::to_string(transA) + "), B " + shapeStr(b) +
                      " (transB=" + std::to_string(transB) + ")");
  if (spec.inputs.size() == 3 && spec.inputs[2].present()) {
    const auto &c = spec.inputs[2].shape;
    std::vector<int64_t> c2 = c;
    while (c2.size() < 2)
      c2.insert(c2.begin(), 1);
    if (c.size() > 2 || (c2[0] != 1 && c2[0] != m) || (c2[1] != 1 && c2[1] != n))
      return spec.error("C of shape " + shapeStr(c) + " does not broadcast to [" +
                        std::to_string(m) + "," + std::to_string(n) + "]");
  }
  return checkOutputShape(spec, {m, n});
}

Expected<KernelPtr> createGemm(const KernelSpec &spec, CpuContext &ctx) {
  const auto &a = spec.inputs[0].shape, &b = spec.inputs[1].shape;
  bool transA = spec.attrInt("transA", 0) != 0, transB = spec.attrInt("transB", 0) != 0;
  float alpha = spec.attrFloat("alpha", 1.f), beta = spec.attrFloat("beta", 1.f);
  int64_t m = transA ? a[1] : a[0], k = transA ? a[0] : a[1], n = transB ? b[0] : b[1];
  bool hasC = spec.inputs.size() == 3 && spec.inputs[2].present() && beta != 0.f;
  auto kernel = std::make_unique<MatMulKernel>(spec, ctx);
  kernel->m_ = m;
  kernel->n_ = n;
  std::vector<int64_t> c2;
  if (hasC) {
    c2 = spec.inputs[2].shape;
    while (c2.size() < 2)
      c2.insert(c2.begin(), 1);
    kernel->cm_ = c2[0];
    kernel->cn_ = c2[1];
  }
  if (k == 0) {
    kernel->emptyK_ = true;
    kernel->prefillC_ = hasC;
    kernel->cScale_ = beta;
    return KernelPtr(std::move(kernel));
  }
  bool cAsBias = hasC && alpha == 1.f && beta == 1.f;
  kernel->prefillC_ = hasC && !cAsBias;
  return buildKernel(spec, [&]() -> KernelPtr {
    using dims = dnnl::memory::dims;
    using dt = dnnl::memory::data_type;
    const dt type = dnnlFloatType(spec.inputs[0].dtype);
    dnnl::memory::desc src(dims{m, k}, type, transA ? dims{1, m} : dims{k, 1});
    dnnl::memory::desc wei(dims{k, n}, type, transB ? dims{1, k} : dims{n, 1});
    dnnl::memory::desc dst = plainDesc({m, n}, type);
    dnnl::memory::desc bias = cAsBias ? plainDesc(c2, type) : dnnl::memory::desc();
    dnnl::primitive_attr attr;
    if (alpha != 1.f)
      attr.set_output_scales(0, {alpha});
    if (kernel->prefillC_) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::desc md(src, wei, bias, dst);
    dnnl::matmul::primitive_desc pd(md, attr, ctx.engine);
    kernel->runner_ = PrimitiveRunner(dnnl::matmul(pd), ctx);
    kernel->runner_.input(DNNL_ARG_SRC, src, 0);
    kernel->runner_.input(DNNL_ARG_WEIGHTS, wei, 1);
    if (cAsBias)
      kernel->runner_.input(DNNL_ARG_BIAS, bias, 2);
    kernel->runner_.output(DNNL_ARG_DST, dst, 0);
    return std::move(kernel);
  });
}

} // namespace dtc::ops::cpu
