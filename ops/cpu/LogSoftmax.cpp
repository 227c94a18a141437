// CPU kernel of LogSoftmax (opset 13 semantics: x - log(sum(exp(x))) over the one axis `axis`,
// default -1, negative counted from the end): a oneDNN softmax_v2_forward primitive with
// algorithm softmax_log (oneDNN 2.6's replacement of the deprecated logsoftmax_forward), f32.
#include "ops/cpu/OneDnnUtil.h"

namespace dtc::ops::cpu {

Status checkLogSoftmax(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (rank == 0)
    return spec.error("input 0 is a scalar; LogSoftmax needs rank >= 1");
  if (axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return Status::ok();
}

Expected<KernelPtr> createLogSoftmax(const KernelSpec &spec, CpuContext &ctx) {
  int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (axis < 0)
    axis += rank;
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc md = plainDesc(spec.inputs[0].shape);
    dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference,
                                     dnnl::algorithm::softmax_log, md, md, static_cast<int>(axis));
    dnnl::softmax_v2_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::softmax_v2_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, md, 0);
    r.output(DNNL_ARG_DST, md, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

} // namespace dtc::ops::cpu
