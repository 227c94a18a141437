// Layout helpers of the CPU kernels (memory descriptors honouring TensorDesc::layout, physical
// dims and axes) and the kernel of ai.dtc.Reorder, which the compiler inserts where a tensor
// changes between row-major and channels-last: one oneDNN reorder primitive, f32 or
// bf16 (mixed precision).
#include "ops/cpu/OneDnnUtil.h"

#include <algorithm>

namespace dtc::ops::cpu {

// ---- layout helpers ----------------------------------------------------------------------------

std::vector<int64_t> physicalShape(const TensorDesc &t) {
  if (t.layout == Layout::kRowMajor || t.shape.size() < 3)
    return t.shape;
  std::vector<int64_t> out = {t.shape[0]};
  out.insert(out.end(), t.shape.begin() + 2, t.shape.end());
  out.push_back(t.shape[1]);
  return out;
}

size_t physicalAxis(size_t axis, Layout layout, size_t rank) {
  if (layout == Layout::kRowMajor || rank < 3 || axis == 0)
    return axis;
  return axis == 1 ? rank - 1 : axis - 1;
}

dnnl::memory::desc layoutDesc(const TensorDesc &t, dnnl::memory::data_type dt) {
  if (t.layout == Layout::kRowMajor || t.shape.size() < 3)
    return plainDesc(t.shape, dt);
  const std::vector<int64_t> &s = t.shape;
  size_t rank = s.size();
  // Memory order N, D1, ..., Dk, C: C is innermost, then the spatial dims, then N.
  dnnl::memory::dims strides(rank);
  int64_t step = 1;
  strides[1] = step;
  step *= std::max<int64_t>(s[1], 1);
  for (size_t i = rank; i-- > 2;) {
    strides[i] = step;
    step *= std::max<int64_t>(s[i], 1);
  }
  strides[0] = step;
  return dnnl::memory::desc(dnnl::memory::dims(s.begin(), s.end()), dt, strides);
}

Status checkSameLayout(const KernelSpec &spec, bool aInput, size_t a, bool bInput, size_t b) {
  const TensorDesc &ta = aInput ? spec.inputs.at(a) : spec.outputs.at(a);
  const TensorDesc &tb = bInput ? spec.inputs.at(b) : spec.outputs.at(b);
  if (ta.layout == tb.layout)
    return Status::ok();
  auto name = [](bool input, size_t i) {
    return (input ? "input " : "output ") + std::to_string(i);
  };
  return spec.error(name(aInput, a) + " is " + layoutName(ta.layout) + " but " + name(bInput, b) +
                    " is " + layoutName(tb.layout) + "; the CPU kernel needs one layout");
}

// ---- ai.dtc.Reorder ----------------------------------------------------------------------------

Status checkReorder(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32, ir::DType::kBFloat16}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  return checkOutputShape(spec, spec.inputs[0].shape);
}

Expected<KernelPtr> createReorder(const KernelSpec &spec, CpuContext &ctx) {
  return buildKernel(spec, [&]() -> KernelPtr {
    const dnnl::memory::data_type dt = dnnlFloatType(spec.inputs[0].dtype);
    dnnl::memory::desc src = layoutDesc(spec.inputs[0], dt), dst = layoutDesc(spec.outputs[0], dt);
    dnnl::reorder::primitive_desc pd(ctx.engine, src, ctx.engine, dst);
    PrimitiveRunner r(dnnl::reorder(pd), ctx);
    r.input(DNNL_ARG_FROM, src, 0);
    r.output(DNNL_ARG_TO, dst, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

} // namespace dtc::ops::cpu
