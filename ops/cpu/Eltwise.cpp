// CPU kernels of the unary activations Relu, Sigmoid and Tanh: one oneDNN eltwise_forward
// primitive each (eltwise_relu with alpha 0, eltwise_logistic, eltwise_tanh), f32 only.
// oneDNN eltwise allows dst == src, so these run in place. Input and output share one layout
// (either: an elementwise op reads its operands as flat arrays).
#include "ops/cpu/OneDnnUtil.h"

namespace dtc::ops::cpu {

namespace {

dnnl::algorithm eltwiseAlgorithm(const std::string &op) {
  if (op == "Relu")
    return dnnl::algorithm::eltwise_relu;
  if (op == "Sigmoid")
    return dnnl::algorithm::eltwise_logistic;
  return dnnl::algorithm::eltwise_tanh;
}

} // namespace

Status checkEltwise(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, 0, false, 0));
  return checkOutputShape(spec, spec.inputs[0].shape);
}

Expected<KernelPtr> createEltwise(const KernelSpec &spec, CpuContext &ctx) {
  return buildKernel(spec, [&]() -> KernelPtr {
    // Same layout for both operands, so the flat (row-major) view computes the same thing.
    dnnl::memory::desc md = plainDesc(spec.inputs[0].shape);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, eltwiseAlgorithm(spec.op), md,
                                  0.f, 0.f);
    dnnl::eltwise_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::eltwise_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, md, 0);
    r.output(DNNL_ARG_DST, md, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

int inPlaceEltwise(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
