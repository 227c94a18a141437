// CPU kernels of ai.dtc.SoftmaxGrad and ai.dtc.LogSoftmaxGrad (ops/training/
// ActivationGradOps.cpp): one oneDNN softmax_v2_backward primitive (softmax_accurate or
// softmax_log) over the one axis `axis` (default -1, negative counted from the end), f32,
// row-major. Inputs dY and Y (the forward output), output dX.
#include "ops/cpu/OneDnnUtil.h"

namespace dtc::ops::cpu {

Status checkSoftmaxGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  for (size_t i = 0; i < 2; ++i)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  if (spec.inputs[1].shape != spec.inputs[0].shape)
    return spec.error("Y has shape " + shapeStr(spec.inputs[1].shape) + ", expected " +
                      shapeStr(spec.inputs[0].shape));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  const int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  const int64_t axis = spec.attrInt("axis", -1);
  if (rank == 0)
    return spec.error("input 0 is a scalar; " + spec.op + " needs rank >= 1");
  if (axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return Status::ok();
}

Expected<KernelPtr> createSoftmaxGrad(const KernelSpec &spec, CpuContext &ctx) {
  const int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (axis < 0)
    axis += rank;
  const dnnl::algorithm alg = spec.op == "LogSoftmaxGrad" ? dnnl::algorithm::softmax_log
                                                          : dnnl::algorithm::softmax_accurate;
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc md = plainDesc(spec.inputs[0].shape);
    dnnl::softmax_v2_forward::desc fd(dnnl::prop_kind::forward_training, alg, md, md,
                                      static_cast<int>(axis));
    dnnl::softmax_v2_forward::primitive_desc fpd(fd, ctx.engine);
    dnnl::softmax_v2_backward::desc bd(alg, md, md, md, static_cast<int>(axis));
    dnnl::softmax_v2_backward::primitive_desc bpd(bd, ctx.engine, fpd);
    PrimitiveRunner r(dnnl::softmax_v2_backward(bpd), ctx);
    r.input(DNNL_ARG_DIFF_DST, md, 0);
    r.input(DNNL_ARG_DST, md, 1);
    r.output(DNNL_ARG_DIFF_SRC, md, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

} // namespace dtc::ops::cpu
