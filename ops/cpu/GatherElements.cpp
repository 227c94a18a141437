// CPU kernel of GatherElements (data of any fixed-size dtype, copied by element size; int32 or
// int64 indices, negative ones from the back, checked at run time): for every element p of the
// indices (= of the output), out[p] = data[p with coordinate `axis` replaced by indices[p]]. An
// odometer over the output's coordinates keeps the data offset of the other axes.
#include "ops/cpu/IndexUtil.h"

namespace dtc::ops::cpu {

namespace {

const std::vector<ir::DType> kGatherElementsTypes = {
    ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kFloat16, ir::DType::kBFloat16,
    ir::DType::kInt8,    ir::DType::kInt16,   ir::DType::kInt32,   ir::DType::kInt64,
    ir::DType::kUInt8,   ir::DType::kUInt16,  ir::DType::kUInt32,  ir::DType::kUInt64,
    ir::DType::kBool};

Expected<int64_t> elementsAxis(const KernelSpec &spec) {
  const int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", 0);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  if (rank == 0)
    return spec.error("input 0 must have rank >= 1");
  if (!normalizeAxisValue(axis, rank))
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return axis;
}

class GatherElementsKernel : public Kernel {
public:
  GatherElementsKernel(const KernelSpec &spec, int64_t axis)
      : where_(spec.where()), axis_(static_cast<size_t>(axis)), indexType_(spec.inputs[1].dtype),
        elem_(static_cast<size_t>(ir::dtypeSize(spec.inputs[0].dtype))),
        outShape_(spec.inputs[1].shape), inStrides_(rowMajorStrides(spec.inputs[0].shape)),
        dim_(spec.inputs[0].shape[static_cast<size_t>(axis)]) {}

  Status run(const KernelArgs &args) override {
    const int64_t n = ir::checkedProduct(outShape_).value_or(0);
    if (n == 0)
      return Status::ok();
    std::vector<int64_t> idx = readIndexTensor(args.inputs[1], indexType_, n);
    const char *in = static_cast<const char *>(args.inputs[0]);
    char *out = static_cast<char *>(args.outputs[0]);
    const size_t rank = outShape_.size();
    std::vector<int64_t> c(rank, 0);
    int64_t base = 0; // data offset of the coordinates other than axis
    for (int64_t p = 0; p < n; ++p) {
      int64_t v = idx[static_cast<size_t>(p)];
      if (v < -dim_ || v >= dim_)
        return Status::error(where_, "index " + std::to_string(v) + " is out of range for axis " +
                                         std::to_string(axis_) + " of size " +
                                         std::to_string(dim_));
      if (v < 0)
        v += dim_;
      std::memcpy(out + static_cast<size_t>(p) * elem_,
                  in + static_cast<size_t>(base + v * inStrides_[axis_]) * elem_, elem_);
      for (size_t a = rank; a-- > 0;) {
        if (a != axis_)
          base += inStrides_[a];
        if (++c[a] < outShape_[a])
          break;
        if (a != axis_)
          base -= inStrides_[a] * outShape_[a];
        c[a] = 0;
      }
    }
    return Status::ok();
  }

private:
  std::string where_;
  size_t axis_;
  ir::DType indexType_;
  size_t elem_;
  std::vector<int64_t> outShape_, inStrides_;
  int64_t dim_;
};

} // namespace

Status checkGatherElements(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, kGatherElementsTypes));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt32, ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_ASSIGN_OR_RETURN(int64_t axis, elementsAxis(spec));
  const std::vector<int64_t> &data = spec.inputs[0].shape, &idx = spec.inputs[1].shape;
  if (idx.size() != data.size())
    return spec.error("indices " + shapeStr(idx) + " must have the rank of data " + shapeStr(data));
  for (size_t a = 0; a < data.size(); ++a)
    if (static_cast<int64_t>(a) != axis && idx[a] > data[a])
      return spec.error("indices " + shapeStr(idx) + " is larger than data " + shapeStr(data) +
                        " on axis " + std::to_string(a));
  if (data[static_cast<size_t>(axis)] == 0 && ir::checkedProduct(idx).value_or(0) > 0)
    return spec.error("axis " + std::to_string(axis) + " of data " + shapeStr(data) +
                      " is empty; no index is in range");
  return checkOutputShape(spec, idx);
}

Expected<KernelPtr> createGatherElements(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(int64_t axis, elementsAxis(spec));
  return KernelPtr(std::make_unique<GatherElementsKernel>(spec, axis));
}

} // namespace dtc::ops::cpu
