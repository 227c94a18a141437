// CPU kernel of BatchNormalization in inference mode (training_mode = 0): Y = scale * (X - mean)
// / sqrt(var + epsilon) + B per channel (axis 1), a oneDNN batch_normalization_forward primitive
// with use_global_stats | use_scale | use_shift; f32 only, X of rank 2 to 5. X and Y share one
// layout (row-major or channels-last); scale, B, mean and var are 1-D.
#include "ops/cpu/OneDnnUtil.h"

namespace dtc::ops::cpu {

Status checkBatchNorm(const KernelSpec &spec) {
  if (spec.attrInt("training_mode", 0) != 0)
    return spec.error("training_mode=1 is not supported by the CPU kernel (inference only)");
  DTC_RETURN_IF_ERROR(checkArity(spec, 5, 5, 1));
  for (size_t i = 0; i < 5; ++i)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const auto &x = spec.inputs[0].shape;
  if (x.size() < 2 || x.size() > 5)
    return spec.error("input 0 has rank " + std::to_string(x.size()) +
                      "; the CPU kernel supports rank 2 to 5");
  for (size_t i = 1; i < 5; ++i)
    if (spec.inputs[i].shape != std::vector<int64_t>{x[1]})
      return spec.error("input " + std::to_string(i) + " has shape " +
                        shapeStr(spec.inputs[i].shape) + ", expected [" + std::to_string(x[1]) +
                        "]");
  DTC_RETURN_IF_ERROR(checkSameLayout(spec, true, 0, false, 0));
  return checkOutputShape(spec, x);
}

Expected<KernelPtr> createBatchNorm(const KernelSpec &spec, CpuContext &ctx) {
  return buildKernel(spec, [&]() -> KernelPtr {
    dnnl::memory::desc md = layoutDesc(spec.inputs[0]);
    dnnl::memory::desc cmd = plainDesc(spec.inputs[1].shape);
    using F = dnnl::normalization_flags;
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md,
                                              spec.attrFloat("epsilon", 1e-5f),
                                              F::use_global_stats | F::use_scale | F::use_shift);
    dnnl::batch_normalization_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::batch_normalization_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, md, 0);
    r.input(DNNL_ARG_SCALE, cmd, 1);
    r.input(DNNL_ARG_SHIFT, cmd, 2);
    r.input(DNNL_ARG_MEAN, cmd, 3);
    r.input(DNNL_ARG_VARIANCE, cmd, 4);
    r.output(DNNL_ARG_DST, md, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

} // namespace dtc::ops::cpu
