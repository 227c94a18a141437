// CPU kernel of GatherND (data of any fixed-size dtype, copied by element size; int64 indices,
// negative ones from the back, checked at run time; batch_dims): each index tuple selects a
// contiguous slice of data, copied to the next slice of the output (GatherNDGeometry).
#include "ops/cpu/IndexUtil.h"

namespace dtc::ops::cpu {

namespace {

class GatherNDKernel : public Kernel {
public:
  GatherNDKernel(const KernelSpec &spec, GatherNDGeometry g)
      : where_(spec.where()), g_(std::move(g)),
        elem_(static_cast<size_t>(ir::dtypeSize(spec.inputs[0].dtype))) {}

  Status run(const KernelArgs &args) override {
    const int64_t *idx = static_cast<const int64_t *>(args.inputs[1]);
    const char *in = static_cast<const char *>(args.inputs[0]);
    char *out = static_cast<char *>(args.outputs[0]);
    const size_t sliceBytes = static_cast<size_t>(g_.slice) * elem_;
    for (int64_t t = 0; t < g_.tuples; ++t) {
      int64_t bad = 0;
      const int64_t off = g_.offset(t, idx + t * g_.m, bad);
      if (off < 0)
        return Status::error(where_, g_.rangeError(off, bad));
      std::memcpy(out + static_cast<size_t>(t) * sliceBytes, in + static_cast<size_t>(off) * elem_,
                  sliceBytes);
    }
    return Status::ok();
  }

private:
  std::string where_;
  GatherNDGeometry g_;
  size_t elem_;
};

} // namespace

Status checkGatherND(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(
      spec, true, 0,
      {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kFloat16, ir::DType::kBFloat16,
       ir::DType::kInt8, ir::DType::kInt16, ir::DType::kInt32, ir::DType::kInt64, ir::DType::kUInt8,
       ir::DType::kUInt16, ir::DType::kUInt32, ir::DType::kUInt64, ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  const int64_t b = spec.attrInt("batch_dims", 0);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  std::vector<int64_t> out;
  DTC_RETURN_IF_ERROR(
      GatherNDGeometry::make(spec, spec.inputs[0].shape, spec.inputs[1].shape, b, out).status());
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createGatherND(const KernelSpec &spec, CpuContext &) {
  std::vector<int64_t> out;
  DTC_ASSIGN_OR_RETURN(GatherNDGeometry g,
                       GatherNDGeometry::make(spec, spec.inputs[0].shape, spec.inputs[1].shape,
                                              spec.attrInt("batch_dims", 0), out));
  return KernelPtr(std::make_unique<GatherNDKernel>(spec, std::move(g)));
}

} // namespace dtc::ops::cpu
