// CPU kernels of Softmax and LogSoftmax (opset 13 semantics: normalize over the one axis
// `axis`, default -1, negative counted from the end; LogSoftmax = x - log(sum(exp(x)))): one
// oneDNN softmax_v2_forward primitive with algorithm softmax_accurate or softmax_log, f32. A row
// holding NaN gives NaN everywhere in that row (NanPropagation.h), as the reference.
#include "ops/cpu/NanPropagation.h"

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
    // oneDNN gives the other entries of a row holding NaN finite values; the reference gives
    // NaN for the whole row (its max and its sum are NaN).
    const auto &shape = spec.inputs[0].shape;
    int64_t outer = 1, inner = 1;
    for (int64_t a = 0; a < axis; ++a)
      outer *= shape[static_cast<size_t>(a)];
    for (int64_t a = axis + 1; a < rank; ++a)
      inner *= shape[static_cast<size_t>(a)];
    return propagateNanRows(std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r)), outer,
                            shape[static_cast<size_t>(axis)], inner);
  });
}

} // namespace dtc::ops::cpu
