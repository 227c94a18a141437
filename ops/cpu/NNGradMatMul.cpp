// CPU kernel of ai.dtc.MatMulT (Y = alpha * op(A) @ op(B), op = swap of the last two axes when
// transA / transB, batch axes broadcast): one oneDNN matmul primitive whose transposed operands
// are described by swapped strides, so no transpose is materialized. f32 or bf16 (f32
// accumulation), rank 2 to 12.
#include "ops/cpu/OneDnnUtil.h"

#include <cstring>

namespace dtc::ops::cpu {

namespace {

struct MatMulTDims {
  size_t batchRank = 0;
  std::vector<int64_t> out; ///< [batch..., M, N]
  int64_t k = 0;
};

Expected<MatMulTDims> matmulTDims(const KernelSpec &spec) {
  const auto &a = spec.inputs[0].shape, &b = spec.inputs[1].shape;
  if (a.size() < 2 || b.size() < 2)
    return spec.error("operands must have rank >= 2, got " + shapeStr(a) + " and " + shapeStr(b));
  bool transA = spec.attrInt("transA", 0) != 0, transB = spec.attrInt("transB", 0) != 0;
  size_t ra = a.size(), rb = b.size();
  int64_t m = a[transA ? ra - 1 : ra - 2], ka = a[transA ? ra - 2 : ra - 1];
  int64_t kb = b[transB ? rb - 1 : rb - 2], n = b[transB ? rb - 2 : rb - 1];
  if (ka != kb)
    return spec.error("inner dimensions differ: A " + shapeStr(a) +
                      " (transA=" + std::to_string(transA) + "), B " + shapeStr(b) +
                      " (transB=" + std::to_string(transB) + ")");
  std::vector<int64_t> batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  MatMulTDims d;
  if (!broadcastShapes(batchA, batchB, d.out))
    return spec.error("batch dimensions " + shapeStr(batchA) + " and " + shapeStr(batchB) +
                      " do not broadcast");
  d.batchRank = d.out.size();
  d.out.push_back(m);
  d.out.push_back(n);
  d.k = ka;
  return d;
}

/// oneDNN descriptor of operand `shape` seen as [batch (padded with leading 1s)..., R, C],
/// where the stored (row-major) matrix is [C, R] when `trans`: the last two strides swap.
dnnl::memory::desc operandDesc(const std::vector<int64_t> &shape, bool trans, size_t batchRank,
                               dnnl::memory::data_type dt) {
  std::vector<int64_t> dims(batchRank + 2 - shape.size(), 1);
  dims.insert(dims.end(), shape.begin(), shape.end());
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * std::max<int64_t>(dims[i], 1);
  if (trans) {
    size_t r = dims.size();
    std::swap(dims[r - 1], dims[r - 2]);
    std::swap(strides[r - 1], strides[r - 2]);
  }
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dt,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

class MatMulTKernel : public Kernel {
public:
  MatMulTKernel(const KernelSpec &spec, CpuContext &ctx)
      : where_(spec.where()), ctx_(ctx), outBytes_(spec.outputs[0].byteSize()) {}

  Status run(const KernelArgs &args) override {
    if (emptyK_) { // a sum over nothing
      std::memset(args.outputs[0], 0, static_cast<size_t>(outBytes_));
      return Status::ok();
    }
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
  bool emptyK_ = false;
};

} // namespace

Status checkMatMulT(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDenseFloatDTypes(spec));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  for (const char *t : {"transA", "transB"}) {
    int64_t v = spec.attrInt(t, 0);
    if (v != 0 && v != 1)
      return spec.error(std::string(t) + " must be 0 or 1, got " + std::to_string(v));
  }
  DTC_ASSIGN_OR_RETURN(MatMulTDims d, matmulTDims(spec));
  return checkOutputShape(spec, d.out);
}

Expected<KernelPtr> createMatMulT(const KernelSpec &spec, CpuContext &ctx) {
  DTC_ASSIGN_OR_RETURN(MatMulTDims d, matmulTDims(spec));
  auto k = std::make_unique<MatMulTKernel>(spec, ctx);
  if (d.k == 0) {
    k->emptyK_ = true;
    return KernelPtr(std::move(k));
  }
  bool transA = spec.attrInt("transA", 0) != 0, transB = spec.attrInt("transB", 0) != 0;
  float alpha = spec.attrFloat("alpha", 1.f);
  return buildKernel(spec, [&]() -> KernelPtr {
    const dnnl::memory::data_type dt = dnnlFloatType(spec.inputs[0].dtype);
    dnnl::memory::desc a = operandDesc(spec.inputs[0].shape, transA, d.batchRank, dt);
    dnnl::memory::desc b = operandDesc(spec.inputs[1].shape, transB, d.batchRank, dt);
    dnnl::memory::desc y = plainDesc(d.out, dt);
    dnnl::primitive_attr attr;
    if (alpha != 1.f)
      attr.set_output_scales(0, {alpha});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, y), attr, ctx.engine);
    k->runner_ = PrimitiveRunner(dnnl::matmul(pd), ctx);
    k->runner_.input(DNNL_ARG_SRC, a, 0);
    k->runner_.input(DNNL_ARG_WEIGHTS, b, 1);
    k->runner_.output(DNNL_ARG_DST, y, 0);
    return std::move(k);
  });
}

} // namespace dtc::ops::cpu
