// CPU kernels of Softmax and LogSoftmax (opset 13 semantics: normalize over the one axis
// `axis`, default -1, negative counted from the end; LogSoftmax = x - log(sum(exp(x)))): one
// oneDNN softmax_v2_forward primitive with algorithm softmax_accurate or softmax_log, f32.
#include "ops/cpu/OneDnnUtil.h"

namespace dtc::ops::cpu {

Status checkSoftmax(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (rank == 0)
    return spec.error("input 0 is a scalar; " + spec.op + " needs rank >= 1");
  if (axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return Status::ok();
}

Expected<KernelPtr> createSoftmax(const KernelSpec &spec, CpuContext &ctx) {
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (axis < 0)
    axis += rank;
  const dnnl::algorithm alg =
      spec.op == "LogSoftmax" ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc md = plainDesc(spec.inputs[0].shape);
    dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, md,
                                     static_cast<int>(axis));
    dnnl::softmax_v2_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::softmax_v2_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, md, 0);
    r.output(DNNL_ARG_DST, md, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

} // namespace dtc::ops::cpu
