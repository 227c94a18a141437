// CPU kernel of PRelu (f32): one oneDNN prelu_forward primitive, y = x > 0 ? x : slope * x, with
// slope broadcast unidirectionally to X (its shape padded with leading 1s to X's rank: oneDNN's
// "shared axes" weights broadcast). Row-major operands; x = 0 gives 0 either way.
#include "ops/cpu/OneDnnUtil.h"

namespace dtc::ops::cpu {

namespace {

/// slope's shape padded with leading 1s to `rank` dims (at least one).
std::vector<int64_t> paddedSlopeShape(const std::vector<int64_t> &slope, size_t rank) {
  rank = std::max<size_t>(rank, 1);
  std::vector<int64_t> padded(rank - std::min(rank, slope.size()), 1);
  padded.insert(padded.end(), slope.begin(), slope.end());
  return padded;
}

} // namespace

Status checkPRelu(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kFloat32}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const std::vector<int64_t> &x = spec.inputs[0].shape, &s = spec.inputs[1].shape;
  std::vector<int64_t> out;
  if (s.size() > x.size() || !broadcastShapes(x, s, out) || out != x)
    return spec.error("slope " + shapeStr(s) + " does not broadcast to X " + shapeStr(x) +
                      " (unidirectional broadcasting)");
  return checkOutputShape(spec, x);
}

Expected<KernelPtr> createPRelu(const KernelSpec &spec, CpuContext &ctx) {
  return buildKernel(spec, [&]() -> KernelPtr {
    const std::vector<int64_t> &x = spec.inputs[0].shape;
    dnnl::memory::desc xmd = plainDesc(x);
    dnnl::memory::desc wmd = plainDesc(paddedSlopeShape(spec.inputs[1].shape, x.size()));
    dnnl::prelu_forward::desc d(dnnl::prop_kind::forward_inference, xmd, wmd);
    dnnl::prelu_forward::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::prelu_forward(pd), ctx);
    r.input(DNNL_ARG_SRC, xmd, 0);
    r.input(DNNL_ARG_WEIGHTS, wmd, 1);
    r.output(DNNL_ARG_DST, xmd, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

} // namespace dtc::ops::cpu
